// Independent oracle for the JSON Schema front-end: ajv (draft 2020-12) with ajv-formats.
// Usage: node validate_json.js cases.json
//   cases.json: [{"schema": {...}, "instances": ["<json text>", ...]}, ...]
// Prints one line of JSON: [[true|false|"error: ..."] per instance] per case. An instance that
// is not valid JSON text is reported as false (JSON.parse is the same parser a client uses).
const fs = require("fs");
const Ajv2020 = require("ajv/dist/2020");
const addFormats = require("ajv-formats");

const cases = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const out = [];
for (const c of cases) {
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
  addFormats(ajv);
  let validate;
  try {
    validate = ajv.compile(c.schema);
  } catch (e) {
    out.push(c.instances.map(() => "error: " + e.message));
    continue;
  }
  out.push(
    c.instances.map((text) => {
      let v;
      try {
        v = JSON.parse(text);
      } catch (e) {
        return false;
      }
      return validate(v);
    })
  );
}
process.stdout.write(JSON.stringify(out) + "\n");
