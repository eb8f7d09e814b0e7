// The check list of the client end-to-end scripts: each check runs in order (later ones may rely
// on the server having answered the earlier ones), prints `ok   name` or `FAIL name: ...`, and
// the process exits non-zero when any failed.
const checks = [];
export const check = (name, fn) => checks.push([name, fn]);

// describe(error): the text printed after FAIL (default: the stack).
export async function runChecks(describe = (e) => e?.stack ?? e) {
  let failed = 0;
  for (const [name, fn] of checks) {
    try {
      await fn();
      console.log(`ok   ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${describe(e)}`);
    }
  }
  process.exit(failed ? 1 : 0);
}
