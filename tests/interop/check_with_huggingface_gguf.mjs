// Reads a GGUF file written by strata with @huggingface/gguf (an independent implementation)
// and checks that it sees the same metadata and tensor infos as strata's own reader.
//   node check_with_huggingface_gguf.mjs NODE_MODULES_PREFIX FILE.gguf EXPECTED.json
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [prefix, file, expectedPath] = process.argv.slice(2);
const require = createRequire(path.resolve(prefix, "package.json"));
const { gguf } = await import(require.resolve("@huggingface/gguf"));
const expected = JSON.parse(readFileSync(expectedPath, "utf8"));
const { metadata, tensorInfos } = await gguf(file, { allowLocalFile: true });

const normalize = (v) =>
  typeof v === "bigint" ? v.toString()
  : Array.isArray(v) ? v.map(normalize)
  : typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v) ? String(v)
  : v;

let failures = 0;
const check = (what, got, want) => {
  const a = JSON.stringify(got), b = JSON.stringify(want);
  if (a !== b) {
    console.error(`MISMATCH ${what}: huggingface/gguf sees ${a}, strata ${b}`);
    failures++;
  }
};

check("version", metadata.version, expected.version);
for (const [key, want] of Object.entries(expected.metadata)) {
  let got = normalize(metadata[key]);
  // Integers: strata reports them as strings (64-bit safe); compare as strings.
  if (typeof want === "string" && typeof got === "number" && Number.isInteger(got)) got = String(got);
  if (Array.isArray(want) && Array.isArray(got))
    got = JSON.parse(JSON.stringify(got), (k, v) => (typeof v === "number" && Number.isInteger(v) ? String(v) : v));
  check(`metadata ${key}`, got, want);
}
check("tensor count", tensorInfos.length, expected.tensors.length);
expected.tensors.forEach((t, i) => {
  const info = tensorInfos[i];
  check(`tensor ${i} name`, info.name, t.name);
  check(`tensor ${t.name} type`, info.dtype, t.type);
  check(`tensor ${t.name} shape`, info.shape.map(String), t.shape);
  check(`tensor ${t.name} offset`, String(info.offset), t.offset);
});
if (failures) process.exit(1);
console.log(`@huggingface/gguf agrees: ${Object.keys(expected.metadata).length} keys, ${tensorInfos.length} tensors`);
