#!/usr/bin/env python3
"""Write the schemas of megabench's JSON outputs: verdict.schema.json
(verdict --format json), diff.schema.json (diff and gate --format json) and
history.schema.json (history --format json, history -o DIR's history.json),
strict (no key a schema does not name), from one description. The finding
kinds and the policy's thresholds are read from policy.schema.json, so that
a new finding or threshold needs no edit here. Run it after changing what a
printer writes (src/receipts/print_json.c, print_history_json.c); the
tests check every output against the schemas it writes.

usage: schemas/output_schemas.py   (writes beside itself)
"""
import collections
import json
import os
O = collections.OrderedDict
def nullable(t, **kw):
    d = {"type": [t, "null"]}; d.update(kw); return d
NUM = nullable("number")
NN_NUM = {"type": ["number", "null"], "minimum": 0}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
NNINT = {"type": "integer", "minimum": 0}
def obj(props, required=None, desc=None):
    d = O()
    d["type"] = "object"
    if desc: d["description"] = desc
    d["required"] = list(props.keys()) if required is None else required
    d["additionalProperties"] = False
    d["properties"] = props
    return d
# the finding kinds and the thresholds are the policy schema's: one place
POLICY = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "policy.schema.json")))
FINDINGS = POLICY["definitions"]["finding"]["enum"]
thresholds = O([(k, {"type": "number", "minimum": 0}) for k in POLICY["properties"] if k not in ("rows", "gate")])
policy = obj(O(list(thresholds.items()) + [
    ("rows", {"type": "object", "description": "per-row thresholds ([rows.NAME] of the policy)",
              "additionalProperties": obj(O(thresholds))}),
    ("gate", obj(O([("fail_on", {"type": "array", "uniqueItems": True, "items": {"enum": FINDINGS}}),
                    ("identical_code_shortcut", BOOL)]))),
    ("source", dict(STR, description="the policy file, or \"built-in defaults\"")),
]), desc="the effective policy: every threshold as it was applied")
side = obj(O([("file", STR), ("commit", nullable("string")), ("describe", nullable("string")),
    ("device", nullable("string")), ("backend", nullable("string"))]), desc="a receipt: its file and what identifies it")
CLASSES = ["SAME", "FASTER", "SLOWER", "AMBIGUOUS"]
pair = obj(O([
    ("fused", nullable("string", description="the fused case's id")),
    ("dtype", nullable("string")), ("mode", nullable("string")),
    ("shape", dict(STR, description="family/axis=value,...")),
    ("class", {"enum": CLASSES, "description": "the fused case against its best alternative (FASTER: the fused kernel wins)"}),
    ("alternative", dict(STR, description="the best alternative's variant")),
    ("outcome", {"enum": ["win (time)", "win (memory)", "same", "loss", "noisy"]}),
    ("speedup", dict(NN_NUM, description="alternative median over fused median")),
    ("fallback", nullable("string")),
    ("speedup_vs_fallback", NN_NUM),
    ("fused_scratch_bytes", {"type": ["integer", "null"], "minimum": 0}),
    ("alternative_scratch_bytes", {"type": ["integer", "null"], "minimum": 0}),
    ("model_speedup", NN_NUM),
    ("model_basis", {"enum": ["bytes", "launches", None]}),
    ("saved_ns_per_call", NUM),
    ("weight", NUM),
    ("weight_explicit", BOOL),
]), desc="one shape of a row in one dtype and mode: the fused case against its best alternative")
row_verdict = obj(O([
    ("row", STR), ("block", dict(STR, maxLength=1)),
    ("verdict", {"enum": ["keep", "conditional", "drop", "ambiguous", "not enough evidence"]}),
    ("evidence", {"enum": ["none", "isolated", "lanes", "lanes inconclusive"]}),
    ("label", dict(STR, description="the verdict as every printer shows it")),
    ("condition", nullable("string", description="conditional: where it wins, what it saves")),
    ("trades", {"enum": ["undeclared", "time", "memory", "both"]}),
    ("best_alternative", nullable("string")),
    ("memory_saved_bytes", NUM), ("memory_saved_fraction", NUM),
    ("status", nullable("string", description="the row's catalog status as built, from the receipt")),
    ("status_condition", nullable("string")),
    ("status_agrees", BOOL), ("status_note", STR), ("reason", STR), ("families_won", STR),
    ("pairs", NNINT),
    ("saved_basis", {"enum": ["per step", "per call", None]}),
    ("saved_ns_per_step", NUM), ("saved_ns_per_call", NUM),
    ("saved_mode", nullable("string")), ("saved_dtype", nullable("string")), ("saved_shape", nullable("string")),
    ("saved_unweighted_pairs", {"type": ["integer", "null"], "minimum": 0}),
    ("largest", {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/pair"}]}),
    ("pair_results", {"type": "array", "items": {"$ref": "#/definitions/pair"}}),
]), desc="a row's verdict within one receipt (src/README.md, Verdicts)")

def schema(id_, title, desc, body, defs):
    d = O()
    d["$schema"] = "http://json-schema.org/draft-07/schema#"
    d["$id"] = "https://megabench.invalid/schemas/%s" % id_
    d["title"] = title
    d["description"] = desc
    d.update(body)
    d["definitions"] = defs
    return d

verdict = schema("verdict.schema.json", "megabench verdict output",
    "What `megabench verdict --format json` prints: the verdict of every row of one receipt.",
    obj(O([("kind", {"const": "megabench.verdict"}), ("receipt", {"$ref": "#/definitions/side"}),
           ("policy", {"$ref": "#/definitions/policy"}), ("lanes_note", nullable("string")),
           ("rows", {"type": "array", "items": {"$ref": "#/definitions/row_verdict"}})])),
    O([("side", side), ("policy", policy), ("row_verdict", row_verdict), ("pair", pair)]))

WHY = ["identical code", "machine or harness changed", "tail", "within the between-run noise", "no timing",
    "timing source changed", "all samples excluded", "no samples", "zero-time samples", "not converged", "too noisy",
    "too few samples", "interval straddles the effect", "not significant", "within the noise", "median and tail disagree",
    "timing not judged (cpu backend)"]
ratio_ci = NN_NUM
comparison = obj(O([
    ("class", {"enum": CLASSES}), ("why", {"enum": WHY + [None]}), ("direction", {"enum": ["faster", "slower", None]}),
    ("identical_code", BOOL), ("machine_changed", BOOL), ("statistics", BOOL),
    ("ratio", dict(NN_NUM, description="Hodges-Lehmann estimate of head over base")),
    ("ratio_lo", NN_NUM), ("ratio_hi", NN_NUM), ("p", {"type": ["number", "null"], "minimum": 0, "maximum": 1}),
    ("u", NUM), ("exact", BOOL), ("base_n", NNINT), ("head_n", NNINT),
    ("base_rel_noise", NUM), ("head_rel_noise", NUM), ("base_cv", NUM), ("head_cv", NUM), ("effect", NUM),
    ("tail", obj(O([("quantile", {"type": "number"}), ("base_ns", NUM), ("head_ns", NUM), ("ratio", NN_NUM),
                    ("ratio_lo", NN_NUM), ("ratio_hi", NN_NUM)]))),
    ("repetitions", {"oneOf": [{"type": "null"}, obj(O([("base_n", NNINT), ("head_n", NNINT), ("ratio", NUM),
        ("base_noise", NUM), ("head_noise", NUM), ("pooled_noise", NUM), ("threshold", NUM)]))]}),
    ("reason", STR),
]), required=["class", "why", "direction", "identical_code", "machine_changed", "statistics", "reason"],
   desc="one case compared; the statistics are present when `statistics` is true")
case = obj(O([
    ("id", dict(STR, description="row/variant/dtype/mode/family/shape: pastes into `run --filter`")),
    ("row", nullable("string")), ("variant", nullable("string")), ("dtype", nullable("string")),
    ("mode", nullable("string")), ("family", nullable("string")),
    ("shape", {"type": ["object", "null"], "additionalProperties": {"type": "integer"}}),
    ("verdict", dict(STR, description="SLOWER, FASTER, SAME, AMBIGUOUS, NOT TIMED, MISSING or NEW, with what else applies")),
    ("wrong_answer", BOOL), ("still_wrong", BOOL), ("status_changed", BOOL), ("fields_missing", BOOL),
    ("base_median_ns", NUM), ("head_median_ns", NUM),
    ("comparison", {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/comparison"}]}),
]))
finding = obj(O([("kind", {"enum": FINDINGS}), ("subject", STR), ("message", STR), ("fails_gate", BOOL)]))
promotion = obj(O([("row", STR), ("base_status", STR), ("head_status", STR), ("condition", STR), ("supported", BOOL),
    ("demotion", BOOL), ("message", STR)]))
counts = obj(O([(k, NNINT) for k in ["slower", "faster", "same", "ambiguous", "machine_changed", "wrong_answers", "still_wrong"]]))
diff = schema("diff.schema.json", "megabench diff and gate output",
    "What `megabench diff --format json` and `megabench gate --format json` print (one document: gate_exit and "
    "gate_reason are the gate's exit code and its reason in both).",
    obj(O([("kind", {"const": "megabench.diff"}), ("comparable", BOOL), ("forced", BOOL), ("reasons", STR),
        ("headline", STR), ("base", {"$ref": "#/definitions/side"}), ("head", {"$ref": "#/definitions/side"}),
        ("policy", {"$ref": "#/definitions/policy"}), ("inconsistent", BOOL),
        ("gate_exit", {"enum": [0, 1, 2, 3, 4]}), ("gate_reason", STR), ("counts", counts),
        ("cases_not_shown", dict(NNINT, description="unchanged cases left out by --only-changed (still in counts)")),
        ("cases", {"type": "array", "items": {"$ref": "#/definitions/case"}}),
        ("findings", {"type": "array", "items": {"$ref": "#/definitions/finding"}}),
        ("rows", {"type": "array", "items": obj(O([("row", STR),
            ("base", {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/row_verdict"}]}),
            ("head", {"$ref": "#/definitions/row_verdict"})]))}),
        ("promotions", {"type": "array", "items": {"$ref": "#/definitions/promotion"}}),
    ])),
    O([("side", side), ("policy", policy), ("case", case), ("comparison", comparison), ("finding", finding),
       ("promotion", promotion), ("row_verdict", row_verdict), ("pair", pair)]))

cell = obj(O([
    ("verdict", {"enum": ["keep", "conditional", "drop", "ambiguous", "not enough evidence"]}),
    ("label", STR), ("evidence", {"enum": ["none", "isolated", "lanes", "lanes inconclusive"]}),
    ("lane", dict(STR, description="the lane delta: \"lane 12.3 us/step (+2.24%)\", \"lane: no win\", \"no lane\"")),
    ("best_alternative", nullable("string")), ("shape", nullable("string")), ("dtype", nullable("string")),
    ("mode", nullable("string")),
    ("fused_median_ns", dict(NN_NUM, description="the fused case at the row's largest shape (what the page charts)")),
    ("alternative_median_ns", dict(NN_NUM, description="its best alternative there")),
    ("status", dict(STR, description="the row's catalog status in that nightly, flagged where the verdict disagrees")),
]), desc="a row in one nightly")
hrow = obj(O([
    ("row", STR), ("decision", {"enum": ["watch", "demote", "confirmed", "dropped"]}),
    ("decision_text", dict(STR, description="the words summary.md and index.html show")),
    ("streak", NNINT),
    ("losing_from", {"type": ["integer", "null"], "minimum": 1, "description": "demote, dropped: the older of the two losing nightlies (its index)"}),
    ("losing_to", {"type": ["integer", "null"], "minimum": 1}),
    ("nightlies", {"type": "array", "description": "per nightly of the group, oldest first; null where it did not run the row",
                   "items": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/cell"}]}}),
]))
nightly = obj(O([("index", {"type": "integer", "minimum": 1}), ("receipt", STR), ("label", STR),
    ("commit", nullable("string")), ("commit_time", {"type": ["integer", "null"]}), ("started_at", STR),
    ("lanes", NNINT)]))
history = schema("history.schema.json", "megabench history output",
    "What `megabench history --format json` prints (and -o DIR writes as history.json): per group of receipts "
    "(device, backend, suite) its nightlies, oldest first, and per row its decision and each nightly's verdict.",
    obj(O([("kind", {"const": "megabench.history"}), ("policy", STR), ("streak", {"type": "integer", "minimum": 1}),
        ("groups", {"type": "array", "items": obj(O([("device", STR), ("backend", STR), ("suite", STR),
            ("nightlies", {"type": "array", "items": {"$ref": "#/definitions/nightly"}}),
            ("rows", {"type": "array", "items": {"$ref": "#/definitions/row"}})]))})])),
    O([("nightly", nightly), ("row", hrow), ("cell", cell)]))
out = os.path.dirname(os.path.abspath(__file__))
for name, s in [("verdict", verdict), ("diff", diff), ("history", history)]:
    with open("%s/%s.schema.json" % (out, name), "w") as f:
        json.dump(s, f, indent=2)
        f.write("\n")
