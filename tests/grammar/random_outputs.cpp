// Writes random (schema, output) pairs as JSON lines, {"schema": ..., "output": "<text>"}, for
// validate_outputs.py to check with an independent JSON schema validator.
//   random_outputs OUT.jsonl [COUNT=300] [SEED=1]

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "grammar/random_schemas.h"

int main(int argc, char** argv) {
  using namespace strata::grammar;
  if (argc < 2) {
    std::cerr << "usage: random_outputs OUT.jsonl [COUNT=300] [SEED=1]\n";
    return 2;
  }
  const int count = argc > 2 ? std::stoi(argv[2]) : 300;
  const auto seed = static_cast<uint32_t>(argc > 3 ? std::stoul(argv[3]) : 1);
  std::ofstream out(argv[1], std::ios::binary);
  if (!out) {
    std::cerr << "cannot write " << argv[1] << "\n";
    return 1;
  }
  auto trie = std::make_shared<const TokenTrie>(testing::walk_vocabulary());
  testing::RandomSchemas schemas(seed);
  int written = 0, unfinished = 0;
  for (int i = 0; written < count && i < count * 4; ++i) {
    const testing::json schema = schemas.schema();
    CompiledJsonSchema compiled = grammar_for_json_schema(schema);
    if (!compiled.unenforced.empty()) continue;  // the check needs fully enforced schemas
    TokenConstraint constraint(compiled.grammar, trie);
    const testing::Walk walk = testing::random_walk(constraint, *trie, schemas.rng(), 3000);
    if (walk.dead_end) {
      std::cerr << "dead end for schema " << schema.dump() << " after " << walk.output << "\n";
      return 1;
    }
    if (!walk.finished) {
      ++unfinished;
      continue;
    }
    out << testing::json{{"schema", schema}, {"output", walk.output}}.dump() << "\n";
    ++written;
  }
  std::cerr << fmt::format("{} pairs written, {} walks hit the step cap\n", written, unfinished);
  return written == count ? 0 : 1;
}
