// Seeded random JSON Schemas and instances, for property tests of the JSON Schema front-end
// (and the end-to-end structured-output test: random schema × random model → ajv-valid).
//
// random_schema covers every keyword the front-end supports: type (and type lists), nested
// objects with required/optional properties and every additionalProperties form, arrays
// (items, prefixItems, minItems/maxItems), enum, const, anyOf, oneOf (with provably
// disjoint branches: different types, disjoint const/enum sets, tagged object unions), allOf of
// object schemas, $ref/$defs with recursion, string lengths, patterns, formats, integer ranges,
// nullable, boolean schemas. Every schema is satisfiable and valid draft 2020-12 (ajv compiles it).
//
// random_instance builds a value of the schema directly from the schema (never from a
// grammar), in the canonical form a grammar produces: compact, properties in schema order,
// strings/arrays/numbers within the caps of `caps`. mutate_instance makes a near miss that is
// usually invalid; the oracle (ajv) decides.
#pragma once

#include <nlohmann/json.hpp>
#include <random>

#include "structured/frontends.h"

namespace loom::structured::test {

struct RandomSchemaOptions {
  int max_depth = 3;
  bool refs = true;
  bool patterns = true;
  bool formats = true;
};

nlohmann::ordered_json random_schema(std::mt19937_64& rng, const RandomSchemaOptions& options = {});

nlohmann::ordered_json random_instance(const nlohmann::ordered_json& schema, std::mt19937_64& rng,
                                       const JsonGrammarOptions& caps);

nlohmann::ordered_json mutate_instance(const nlohmann::ordered_json& instance,
                                       std::mt19937_64& rng);

}  // namespace loom::structured::test
