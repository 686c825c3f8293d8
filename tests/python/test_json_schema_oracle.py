"""folio's JSON Schema converter held against `jsonschema`, a validator folio
did not write, through `folio grammar --check` (no model needed).

Two sources of cases, both checked both ways (every valid instance accepted,
every invalid one refused):
- random schemas over the keywords where the converter does more than
  transcribe (oneOf over `required` lists, a key one alternative requires
  and the other forbids, patternProperties, keys that are no keyword,
  formats no draft defines), each with random objects; the grammar fixes the
  order of members, so an object counts as accepted when some order of its
  members is;
- hand-written schemas with instances drawn by hypothesis-jsonschema, and
  invalid ones made from them by one mutation.
The random seed is fresh each run and printed on a failure.
"""
import copy
import itertools
import json
import os
import random
import subprocess

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_jsonschema import from_schema

from test_server import FOLIO

SEED = int(os.environ.get("FOLIO_TEST_SEED", random.SystemRandom().randrange(1 << 30)))


def check(schema, texts):
    """Whether folio's grammar for `schema` (strict whitespace: ", " and
    ": ") accepts each text; None if folio refuses the schema."""
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"schema-{os.getpid()}.json"),
              "w") as f:
        json.dump(schema, f)
    r = subprocess.run([FOLIO, "grammar", "--json-schema", f.name, "--whitespace", "strict",
                        "--check"], input="".join(json.dumps(t) + "\n" for t in texts),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        assert "folio grammar:" in r.stderr and "--json-schema" in r.stderr, r.stderr
        return None
    out = r.stdout.split()
    assert len(out) == len(texts), r.stdout
    return [x == "true" for x in out]


def dump(value):
    """JSON as the strict grammar writes it."""
    if isinstance(value, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + dump(v)
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


KEYS = ["a", "b", "c", "x_1", "x_b", "y"]


def random_schema(rng):
    props = {k: rng.choice([{"type": "number"}, {"type": "string"}, {}, False])
             for k in rng.sample(KEYS[:3], rng.randint(0, 3))}
    s = {"type": "object", "properties": props}
    kind = rng.randrange(4)
    if kind == 0:
        s["oneOf"] = [{"required": rng.sample(KEYS[:4], rng.randint(1, 2))}
                      for _ in range(rng.randint(2, 3))]
    elif kind == 1:
        pattern_schema = rng.choice([{"type": "string"}, {"type": "number"}])
        s["patternProperties"] = {p: pattern_schema
                                  for p in rng.sample(["^x_", "b$", "[0-9]"], rng.randint(1, 2))}
        s["additionalProperties"] = False
    elif kind == 2:
        s["oneOf"] = [{"required": rng.sample(KEYS, 1)},
                      {"properties": {k: {} for k in rng.sample(KEYS, 2)},
                       "additionalProperties": False}]
    else:
        # Keys that are no keyword, and a format no draft defines: ignored.
        s["x-order"] = 3
        s["javaType"] = "Thing"
        s["properties"]["y"] = {"type": "string", "format": "semver", "example": "1.0"}
    if rng.random() < 0.3:
        s["required"] = rng.sample(KEYS[:3], 1)
    return s


def test_random_schemas_agree_with_jsonschema():
    rng = random.Random(SEED)
    compiled = 0
    for _ in range(150):
        schema = random_schema(rng)
        objects = []
        for _ in range(30):
            keys = rng.sample(KEYS, rng.randint(0, 4))
            objects.append({k: rng.choice([1, 2.5, "s", True, None, [1], {"k": 1}])
                            for k in keys})
        texts = [[dump({k: o[k] for k in order}) for order in itertools.permutations(o)]
                 for o in objects]
        got = check(schema, [t for ts in texts for t in ts])
        if got is None:
            continue
        compiled += 1
        validator = jsonschema.Draft202012Validator(schema)
        it = iter(got)
        for o, ts in zip(objects, texts):
            accepted = any([next(it) for _ in ts])
            assert accepted == validator.is_valid(o), (
                f"seed {SEED}: {json.dumps(schema)} on {json.dumps(o)}: jsonschema says "
                f"{validator.is_valid(o)}, folio {accepted}")
    # Most of these compile; the rest are refusals by name (e.g. a required
    # key every alternative forbids leaves nothing to write).
    assert compiled >= 100, f"seed {SEED}: only {compiled} of 150 schemas compiled"


HAND_WRITTEN = [
    {"type": "object",
     "properties": {"name": {"type": "string", "maxLength": 12},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
     "required": ["name"], "additionalProperties": False},
    {"type": "object",
     "properties": {"shape": {"enum": ["circle", "rectangle"]},
                    "dimensions": {"type": "object",
                                   "properties": {"radius": {"type": "integer"},
                                                  "length": {"type": "integer"},
                                                  "width": {"type": "integer"}},
                                   "oneOf": [{"required": ["radius"]},
                                             {"required": ["length", "width"]}],
                                   "additionalProperties": False}},
     "required": ["shape", "dimensions"], "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "integer"}},
     "patternProperties": {"^label_[a-z]+$": {"type": "string", "maxLength": 5}},
     "additionalProperties": False, "required": ["id"]},
    # (hypothesis-jsonschema draws no recursive schema.)
    {"$schema": "http://json-schema.org/draft-07/schema#",
     "definitions": {"point": {"type": "object",
                               "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                               "required": ["x", "y"], "additionalProperties": False}},
     "type": "object",
     "properties": {"from": {"$ref": "#/definitions/point"},
                    "to": {"anyOf": [{"$ref": "#/definitions/point"}, {"type": "null"}]}},
     "required": ["from"], "additionalProperties": False},
    # Draft 7's positional items (hypothesis-jsonschema knows no prefixItems).
    {"$schema": "http://json-schema.org/draft-07/schema#",
     "type": "array", "items": [{"type": "boolean"}, {"const": "x"}],
     "additionalItems": {"type": "integer", "exclusiveMinimum": -3, "maximum": 40},
     "maxItems": 5},
]


def validator(schema):
    """jsonschema's validator for the draft the schema names (2020-12 if none)."""
    return jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)(schema)


def ordered(value, schema, root):
    """`value` with each object's members in the order its schema declares
    them (then the rest): the order folio's grammar writes."""
    while isinstance(schema, dict) and "$ref" in schema:
        schema = root["definitions"][schema["$ref"].split("/")[-1]]
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties", {})
        keys = [k for k in props if k in value] + [k for k in value if k not in props]
        out = {}
        for k in keys:
            sub = props.get(k, {})
            if "anyOf" in sub:
                sub = next((s for s in sub["anyOf"]
                            if validator({**root, **s}).is_valid(value[k])),
                           {})
            out[k] = ordered(value[k], sub, root)
        return out
    if isinstance(value, list) and isinstance(schema, dict):
        items = schema.get("items", {})
        return [ordered(v, items[i] if isinstance(items, list) and i < len(items)
                        else schema.get("additionalItems", {}) if isinstance(items, list)
                        else items, root) for i, v in enumerate(value)]
    return value


def draw(schema, n):
    out = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(from_schema(copy.deepcopy(schema)))  # it rewrites the schema it is given
    def collect(x):
        out.append(x)

    collect()
    return out


def mutations(value, rng):
    """A few edits of an instance (each may or may not break it)."""
    if isinstance(value, dict) and value:
        k = rng.choice(sorted(value))
        yield {kk: v for kk, v in value.items() if kk != k}
        yield {**value, k: rng.choice(["zz", 10**6, None, [], True])}
        yield {**value, "extra": 1}
    if isinstance(value, list):
        yield value + [value[-1]] * 5 if value else ["x"]
        yield list(reversed(value))
    yield "not the shape"


@pytest.mark.parametrize("index", range(len(HAND_WRITTEN)))
def test_hypothesis_instances_and_their_mutations(index):
    schema = HAND_WRITTEN[index]
    check_valid = validator(schema).is_valid
    rng = random.Random(SEED + index)
    valid = [ordered(x, schema, schema) for x in draw(schema, 60)]
    assert all(check_valid(x) for x in valid)
    invalid = [m for x in valid for m in mutations(x, rng) if not check_valid(m)]
    invalid = [ordered(x, schema, schema) for x in invalid]
    assert valid and invalid
    got = check(schema, [dump(x) for x in valid + invalid])
    assert got is not None, f"folio refused {json.dumps(schema)}"
    for x, accepted in zip(valid, got):
        assert accepted, f"seed {SEED}: valid {dump(x)} refused by {json.dumps(schema)}"
    for x, accepted in zip(invalid, got[len(valid):]):
        assert not accepted, f"seed {SEED}: invalid {dump(x)} accepted by {json.dumps(schema)}"
