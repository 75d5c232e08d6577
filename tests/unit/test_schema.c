/* Unit tests for the draft-07 validator (src/receipts/schema.c): every
 * keyword, the pointers and messages of its issues, $ref resolution, broken
 * schemas, and the built-in schemas on the documents in tests/schema/. */
#include "receipts/schema.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEEP_NESTING 300   /* deeper than the validator's schema depth limit */
#define SHALLOW_NESTING 40 /* well inside it */
#define MANY_MISSING 20    /* more than MB_SCHEMA_MAX_ISSUES */

typedef struct keyword_case {
	const char *schema;
	const char *instance;
	bool valid;
	const char *pointer; /* of the first issue, when invalid */
	const char *keyword;
	const char *message; /* a substring of the first issue's message */
} keyword_case;

static const keyword_case keyword_cases[] = {
	/* type */
	{ "{\"type\":\"integer\"}", "3", true, NULL, NULL, NULL },
	{ "{\"type\":\"integer\"}", "3.0", true, NULL, NULL, NULL },
	{ "{\"type\":\"integer\"}", "3.5", false, "", "type", "expected integer, got number" },
	{ "{\"type\":\"integer\"}", "\"3\"", false, "", "type", "expected integer, got string" },
	{ "{\"type\":\"number\"}", "3", true, NULL, NULL, NULL },
	{ "{\"type\":[\"string\",\"null\"]}", "null", true, NULL, NULL, NULL },
	{ "{\"type\":[\"string\",\"null\"]}", "4", false, "", "type", "expected string or null, got integer" },
	{ "{\"type\":\"boolean\"}", "0", false, "", "type", "got integer" },
	{ "{\"type\":\"object\"}", "[]", false, "", "type", "expected object, got array" },
	/* enum and const: deep equality, 1 == 1.0, key order irrelevant */
	{ "{\"enum\":[\"a\",\"b\"]}", "\"b\"", true, NULL, NULL, NULL },
	{ "{\"enum\":[\"a\",\"b\"]}", "\"c\"", false, "", "enum", "value \"c\" is not one of [\"a\",\"b\"]" },
	{ "{\"enum\":[1.0,[2]]}", "1", true, NULL, NULL, NULL },
	{ "{\"enum\":[1.0,[2]]}", "[2.0]", true, NULL, NULL, NULL },
	{ "{\"const\":{\"a\":[1,{\"b\":2}],\"c\":null}}", "{\"c\":null,\"a\":[1.0,{\"b\":2}]}", true, NULL, NULL, NULL },
	{ "{\"const\":{\"a\":[1,{\"b\":2}]}}", "{\"a\":[1,{\"b\":3}]}", false, "", "const", "expected {\"a\":[1,{\"b\":2}]}" },
	{ "{\"const\":false}", "0", false, "", "const", "expected false, got 0" },
	{ "{\"const\":{\"a\":1}}", "{\"a\":1,\"b\":2}", false, "", "const", NULL },
	/* numbers */
	{ "{\"minimum\":1}", "-4", false, "", "minimum", "value -4 is less than minimum 1" },
	{ "{\"minimum\":1}", "1", true, NULL, NULL, NULL },
	{ "{\"minimum\":1.5}", "1", false, "", "minimum", "less than minimum 1.5" },
	{ "{\"maximum\":3}", "3.5", false, "", "maximum", "value 3.5 is greater than maximum 3" },
	{ "{\"exclusiveMinimum\":0}", "0", false, "", "exclusiveMinimum", "not greater than exclusive minimum 0" },
	{ "{\"exclusiveMinimum\":0}", "0.001", true, NULL, NULL, NULL },
	{ "{\"exclusiveMaximum\":1}", "1.0", false, "", "exclusiveMaximum", "not less than exclusive maximum 1" },
	{ "{\"minimum\":9007199254740993}", "9007199254740992", false, "", "minimum", NULL },
	{ "{\"minimum\":5}", "\"a string is not checked\"", true, NULL, NULL, NULL },
	{ "{\"multipleOf\":0.0001}", "0.0075", true, NULL, NULL, NULL },
	{ "{\"multipleOf\":0.0001}", "0.00751", false, "", "multipleOf", "is not a multiple of" },
	{ "{\"multipleOf\":0.1}", "0.3", true, NULL, NULL, NULL },
	{ "{\"multipleOf\":0.01}", "19.99", true, NULL, NULL, NULL },
	{ "{\"multipleOf\":1}", "1000000000000000.5", false, "", "multipleOf", NULL },
	{ "{\"multipleOf\":2}", "7", false, "", "multipleOf", "value 7 is not a multiple of 2" },
	{ "{\"multipleOf\":2}", "8", true, NULL, NULL, NULL },
	{ "{\"multipleOf\":0.5}", "1e308", true, NULL, NULL, NULL },
	/* strings: lengths count code points, not bytes */
	{ "{\"maxLength\":5}", "\"h\\u00e9llo\"", true, NULL, NULL, NULL },
	{ "{\"maxLength\":4}", "\"h\\u00e9llo\"", false, "", "maxLength", "string has 5 characters, more than maxLength 4" },
	{ "{\"minLength\":3}", "\"\\u65e5\\u672c\"", false, "", "minLength", "string has 2 characters, fewer than minLength 3" },
	{ "{\"minLength\":1,\"maxLength\":1}", "\"\\ud83d\\ude00\"", true, NULL, NULL, NULL },
	{ "{\"minLength\":2.0}", "\"ab\"", true, NULL, NULL, NULL },
	/* pattern: ECMA-262 translated, unanchored search */
	{ "{\"pattern\":\"\\\\d+\"}", "\"abc123\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"\\\\d+\"}", "\"abc\"", false, "", "pattern", "string \"abc\" does not match pattern \"\\\\d+\"" },
	{ "{\"pattern\":\"^\\\\w+$\"}", "\"a_b9\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^\\\\w+$\"}", "\"a-b\"", false, "", "pattern", NULL },
	{ "{\"pattern\":\"^\\\\W$\"}", "\"-\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^\\\\D+$\"}", "\"ab1\"", false, "", "pattern", NULL },
	{ "{\"pattern\":\"\\\\s\"}", "\"a b\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^\\\\S+$\"}", "\"a b\"", false, "", "pattern", NULL },
	{ "{\"pattern\":\"^[\\\\d.]+$\"}", "\"1.25\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[\\\\w-]+$\"}", "\"a-b_c\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[\\\\]a]+$\"}", "\"]a]\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[^\\\\s]+$\"}", "\"ab\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[\\\\^]$\"}", "\"^\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[\\\\^\\\\-]+$\"}", "\"^-\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[^\\\\^]$\"}", "\"^\"", false, "", "pattern", NULL },
	{ "{\"pattern\":\"^[a\\\\^]+$\"}", "\"a^a\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[\\\\u0041-\\\\u005A]+$\"}", "\"ABZ\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[\\\\t ]$\"}", "\"\\t\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^(?:ab)+c$\"}", "\"ababc\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^a+?b$\"}", "\"aab\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^a{2,3}$\"}", "\"aaaa\"", false, "", "pattern", NULL },
	{ "{\"pattern\":\"^x{$\"}", "\"x{\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^1\\\\.5$\"}", "\"1x5\"", false, "", "pattern", NULL },
	{ "{\"pattern\":\"^\\\\u00e9$\"}", "\"\\u00e9\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^a.c$\"}", "\"a\\nc\"", false, "", "pattern", NULL },
	{ "{\"pattern\":\"^a\\\\/b$\"}", "\"a/b\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"^[0-9]{4}-[0-9]{2}$\"}", "\"2026-01\"", true, NULL, NULL, NULL },
	{ "{\"pattern\":\"\"}", "\"anything\"", true, NULL, NULL, NULL },
	{ "{\"format\":\"date-time\"}", "\"not a date\"", true, NULL, NULL, NULL },
	/* objects */
	{ "{\"required\":[\"seed\"]}", "{}", false, "", "required", "missing required property \"seed\"" },
	{ "{\"required\":[\"seed\"]}", "[]", true, NULL, NULL, NULL },
	{ "{\"properties\":{\"a\":{\"properties\":{\"b~/c\":{\"type\":\"integer\"}}}}}",
	  "{\"a\":{\"b~/c\":\"x\"}}", false, "/a/b~0~1c", "type", "expected integer, got string" },
	{ "{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"foo\":2}",
	  false, "/foo", "additionalProperties", "property \"foo\" is not allowed" },
	{ "{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\":1,\"y\":\"z\"}", false, "/y", "type", NULL },
	{ "{\"patternProperties\":{\"^x_\\\\d+$\":{\"type\":\"integer\"}}}", "{\"x_1\":\"s\"}", false, "/x_1", "type", NULL },
	{ "{\"patternProperties\":{\"^x_\\\\d+$\":{\"type\":\"integer\"}}}", "{\"x_a\":\"s\"}", true, NULL, NULL, NULL },
	{ "{\"patternProperties\":{\"^x_\":{}},\"additionalProperties\":false}", "{\"x_1\":1,\"y\":2}",
	  false, "/y", "additionalProperties", "property \"y\" is not allowed" },
	{ "{\"patternProperties\":{\"a\":{\"minimum\":2},\"b\":{\"maximum\":1}}}", "{\"ab\":1.5}", false, "/ab", "minimum", NULL },
	{ "{\"propertyNames\":{\"pattern\":\"^[a-z]+$\"}}", "{\"abc\":1,\"Abc\":2}", false, "/Abc", "propertyNames",
	  "property name \"Abc\" is not allowed: string \"Abc\" does not match pattern" },
	{ "{\"propertyNames\":{\"maxLength\":2}}", "{\"ab\":1}", true, NULL, NULL, NULL },
	{ "{\"dependencies\":{\"a\":[\"b\"]}}", "{\"a\":1}", false, "", "dependencies",
	  "property \"b\" is required because \"a\" is present" },
	{ "{\"dependencies\":{\"a\":[\"b\"]}}", "{\"b\":1}", true, NULL, NULL, NULL },
	{ "{\"dependencies\":{\"a\":{\"required\":[\"c\"]}}}", "{\"a\":1}", false, "", "required", "\"c\"" },
	{ "{\"minProperties\":2}", "{\"a\":1}", false, "", "minProperties", "object has 1 properties, fewer than minProperties 2" },
	{ "{\"maxProperties\":1}", "{\"a\":1,\"b\":2}", false, "", "maxProperties", NULL },
	/* arrays */
	{ "{\"items\":{\"type\":\"integer\"}}", "[1,\"x\"]", false, "/1", "type", "expected integer, got string" },
	{ "{\"items\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"additionalItems\":false}", "[1,\"a\",3]",
	  false, "/2", "additionalItems", "item 2 is not allowed: the tuple has 2 items" },
	{ "{\"items\":[{\"type\":\"integer\"}],\"additionalItems\":{\"type\":\"string\"}}", "[1,\"a\",3]",
	  false, "/2", "type", NULL },
	{ "{\"items\":[{\"type\":\"integer\"}]}", "[1,\"anything\"]", true, NULL, NULL, NULL },
	{ "{\"additionalItems\":false}", "[1,2]", true, NULL, NULL, NULL },
	{ "{\"contains\":{\"const\":3}}", "[1,3]", true, NULL, NULL, NULL },
	{ "{\"contains\":{\"const\":3}}", "[1,2]", false, "", "contains", "none of the 2 items" },
	{ "{\"contains\":{\"const\":3}}", "[]", false, "", "contains", NULL },
	{ "{\"minItems\":1}", "[]", false, "", "minItems", "array has 0 items, fewer than minItems 1" },
	{ "{\"maxItems\":1}", "[1,2]", false, "", "maxItems", "array has 2 items, more than maxItems 1" },
	{ "{\"uniqueItems\":true}", "[1,\"1\",true]", true, NULL, NULL, NULL },
	{ "{\"uniqueItems\":true}", "[1,2,1.0]", false, "", "uniqueItems", "items 0 and 2 are equal" },
	{ "{\"uniqueItems\":true}", "[{\"a\":1,\"b\":2},{\"b\":2,\"a\":1}]", false, "", "uniqueItems", NULL },
	{ "{\"uniqueItems\":false}", "[1,1]", true, NULL, NULL, NULL },
	/* combinators */
	{ "{\"allOf\":[{\"minimum\":2},{\"maximum\":1}]}", "1.5", false, "", "minimum", NULL },
	{ "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "3", true, NULL, NULL, NULL },
	{ "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "null", false, "", "anyOf",
	  "no alternative matches: expected string, got null; expected integer, got null" },
	{ "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"minimum\":5}]}", "3", false, "", "minimum",
	  "value 3 is less than minimum 5" },
	{ "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "1", false, "", "oneOf",
	  "value matches alternatives 0 and 1, expected exactly one" },
	{ "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "-1", true, NULL, NULL, NULL },
	{ "{\"oneOf\":[{\"type\":\"null\"},{\"$ref\":\"#/definitions/case\"}],"
	  "\"definitions\":{\"case\":{\"type\":\"object\",\"required\":[\"seed\"]}}}", "{}",
	  false, "", "required", "missing required property \"seed\"" },
	{ "{\"oneOf\":[{\"type\":\"null\"},{\"$ref\":\"#/definitions/case\"}],"
	  "\"definitions\":{\"case\":{\"properties\":{\"seed\":{\"type\":\"integer\"}},\"type\":\"object\"}}}",
	  "{\"seed\":\"x\"}", false, "/seed", "type", "expected integer, got string" },
	{ "{\"not\":{\"type\":\"string\"}}", "\"x\"", false, "", "not", "must not match" },
	{ "{\"not\":{\"type\":\"string\"}}", "1", true, NULL, NULL, NULL },
	{ "{\"if\":{\"properties\":{\"a\":{\"const\":1}}},\"then\":{\"required\":[\"b\"]},\"else\":{\"required\":[\"c\"]}}",
	  "{\"a\":1}", false, "", "required", "\"b\"" },
	{ "{\"if\":{\"properties\":{\"a\":{\"const\":1}}},\"then\":{\"required\":[\"b\"]},\"else\":{\"required\":[\"c\"]}}",
	  "{\"a\":2}", false, "", "required", "\"c\"" },
	{ "{\"then\":{\"required\":[\"b\"]}}", "{}", true, NULL, NULL, NULL },
	/* boolean schemas */
	{ "true", "{\"any\":[1]}", true, NULL, NULL, NULL },
	{ "false", "1", false, "", "false", "no value is allowed here" },
	{ "{\"properties\":{\"a\":false}}", "{\"a\":1}", false, "/a", "false", NULL },
	{ "{\"properties\":{\"a\":false}}", "{\"b\":1}", true, NULL, NULL, NULL },
	/* $ref */
	{ "{\"properties\":{\"n\":{\"$ref\":\"#\"}},\"additionalProperties\":false}", "{\"n\":{\"n\":{\"x\":1}}}",
	  false, "/n/n/x", "additionalProperties", NULL },
	{ "{\"definitions\":{\"pos\":{\"minimum\":1}},\"items\":{\"$ref\":\"#/definitions/pos\"}}", "[1,0]",
	  false, "/1", "minimum", NULL },
	{ "{\"items\":[{\"type\":\"integer\"},{\"$ref\":\"#/items/0\"}]}", "[1,\"x\"]", false, "/1", "type", NULL },
	{ "{\"t~f\":{\"type\":\"integer\"},\"s/f\":{\"type\":\"integer\"},\"p%f\":{\"type\":\"integer\"},"
	  "\"properties\":{\"t\":{\"$ref\":\"#/t~0f\"},\"s\":{\"$ref\":\"#/s~1f\"},\"p\":{\"$ref\":\"#/p%25f\"}}}",
	  "{\"t\":1,\"s\":2,\"p\":\"x\"}", false, "/p", "type", NULL },
	{ "{\"definitions\":{\"a\":{\"type\":\"integer\"},\"b\":{\"$ref\":\"#/definitions/a\"}},"
	  "\"$ref\":\"#/definitions/b\"}", "\"x\"", false, "", "type", NULL },
	{ "{\"definitions\":{\"arr\":{\"type\":\"array\"}},\"properties\":{\"f\":{\"$ref\":\"#/definitions/arr\",\"maxItems\":1}}}",
	  "{\"f\":[1,2,3]}", true, NULL, NULL, NULL },
	{ "{\"allOf\":[{\"$ref\":\"#foo\"}],\"definitions\":{\"A\":{\"$id\":\"#foo\",\"type\":\"integer\"}}}",
	  "1", true, NULL, NULL, NULL },
	{ "{\"allOf\":[{\"$ref\":\"#foo\"}],\"definitions\":{\"A\":{\"$id\":\"#foo\",\"type\":\"integer\"}}}",
	  "\"x\"", false, "", "type", NULL },
	{ "{\"$id\":\"http://localhost:1234/root\",\"allOf\":[{\"$ref\":\"item.json\"}],"
	  "\"definitions\":{\"A\":{\"$id\":\"item.json\",\"type\":\"integer\"}}}", "\"x\"", false, "", "type", NULL },
	{ "{\"$id\":\"http://localhost:1234/tree\",\"properties\":{\"nodes\":{\"items\":{\"$ref\":\"node\"}}},"
	  "\"definitions\":{\"node\":{\"$id\":\"http://localhost:1234/node\","
	  "\"properties\":{\"value\":{\"type\":\"number\"},\"subtree\":{\"$ref\":\"tree\"}}}}}",
	  "{\"nodes\":[{\"value\":1,\"subtree\":{\"nodes\":[{\"value\":\"bad\"}]}}]}",
	  false, "/nodes/0/subtree/nodes/0/value", "type", NULL },
	{ "{\"$id\":\"http://x.invalid/dir/a.json\",\"definitions\":{\"b\":{\"$id\":\"../other/b.json\",\"type\":\"string\"}},"
	  "\"allOf\":[{\"$ref\":\"http://x.invalid/other/b.json\"}]}", "1", false, "", "type", NULL },
	{ "{\"$id\":\"http://x.invalid/s.json\",\"definitions\":{\"n\":{\"type\":\"null\"}},"
	  "\"not\":{\"$ref\":\"http://x.invalid/s.json#/definitions/n\"}}", "null", false, "", "not", NULL },
	{ "{\"$ref\":\"#/definitions/t\",\"definitions\":{\"t\":true}}", "1", true, NULL, NULL, NULL },
	{ "{\"properties\":{\"$ref\":{\"type\":\"string\"}}}", "{\"$ref\":2}", false, "/$ref", "type", NULL },
};

/* Schemas the validator must refuse, with the code and a part of err.text. */
typedef struct bad_case {
	const char *schema;
	const char *instance;
	int code;
	const char *where; /* a substring of err.where */
	const char *text;  /* a substring of err.text */
} bad_case;

static const bad_case bad_cases[] = {
	{ "{\"$ref\":\"#/definitions/missing\"}", "1", MB_EINVAL, "$ref", "does not resolve" },
	{ "{\"$ref\":\"#nowhere\"}", "1", MB_EINVAL, "$ref", "does not resolve" },
	{ "{\"properties\":{\"a\":{\"$ref\":5}}}", "{}", MB_EINVAL, "#/properties/a/$ref", "expected a string" },
	/* found by the pre-pass even though the instance never reaches it */
	{ "{\"properties\":{\"a\":{\"pattern\":\"[a-\"}}}", "{}", MB_EINVAL, "#/properties/a/pattern", "bad regex" },
	{ "{\"pattern\":\"(?=a)\"}", "\"a\"", MB_EINVAL, "pattern", "lookaround" },
	{ "{\"pattern\":\"\\\\p{L}\"}", "\"a\"", MB_EINVAL, "pattern", "escape not supported" },
	{ "{\"patternProperties\":{\"(\":{}}}", "{}", MB_EINVAL, "patternProperties", "bad regex" },
	{ "{\"$ref\":\"http://json-schema.org/draft-07/schema#\"}", "{}", MB_EUNSUPPORTED, "$ref", "remote $ref" },
	{ "{\"$id\":\"http://a.invalid/s\",\"not\":{\"$ref\":\"other.json\"}}", "{}", MB_EUNSUPPORTED, "#/not/$ref",
	  "http://a.invalid/other.json" },
	/* draft-07 ignores an $id beside $ref, so the reference stays relative */
	{ "{\"$id\":\"http://a.invalid/s\",\"$ref\":\"other.json\"}", "{}", MB_EUNSUPPORTED, "$ref", "(other.json)" },
	/* a malformed keyword is a broken schema even where the instance skips it */
	{ "{\"minimum\":\"x\"}", "\"a\"", MB_EINVAL, "#/minimum", "expected a number" },
	{ "{\"$ref\":\"#\"}", "1", MB_EINVAL, "$ref", "leads back to itself" },
	{ "{\"definitions\":{\"a\":{\"$ref\":\"#/definitions/b\"},\"b\":{\"allOf\":[{\"$ref\":\"#/definitions/a\"}]}},"
	  "\"$ref\":\"#/definitions/a\"}", "1", MB_EINVAL, "$ref", "leads back to itself" },
	{ "{\"type\":\"float\"}", "1", MB_EINVAL, "#/type", "unknown type \"float\"" },
	{ "{\"minLength\":-1}", "\"a\"", MB_EINVAL, "minLength", "non-negative integer" },
	{ "{\"multipleOf\":0}", "1", MB_EINVAL, "multipleOf", "greater than 0" },
	{ "{\"required\":\"a\"}", "{}", MB_EINVAL, "required", "expected an array" },
	{ "{\"anyOf\":[]}", "1", MB_EINVAL, "anyOf", "non-empty array" },
	{ "{\"properties\":{\"a\":3}}", "{\"a\":1}", MB_EINVAL, "#/properties/a", "expected a schema" },
};

static json_t *parse(const char *text)
{
	json_error_t error;
	json_t *value = json_loads(text, JSON_DECODE_ANY, &error);

	CHECK_MSG(value != NULL, "cannot parse test JSON %s: %s", text, error.text);
	return value;
}

static json_t *load(const char *rel)
{
	json_error_t error;
	json_t *value = json_load_file(mb_test_src(rel), 0, &error);

	CHECK_MSG(value != NULL, "cannot load %s: %s", rel, error.text);
	return value;
}

static bool has_issue(const mb_schema_report *r, const char *pointer, const char *keyword, const char *message)
{
	size_t i;

	for (i = 0; i < r->count; i++) {
		if (pointer && strcmp(r->items[i].pointer, pointer) != 0)
			continue;
		if (keyword && strcmp(r->items[i].keyword, keyword) != 0)
			continue;
		if (message && !strstr(r->items[i].message, message))
			continue;
		return true;
	}
	return false;
}

static void dump(const mb_schema_report *r)
{
	mb_schema_report_print(r, "    got ", stderr);
}

static void test_keywords(void)
{
	mb_schema_report report;
	mb_error err;
	size_t i;

	for (i = 0; i < sizeof(keyword_cases) / sizeof(keyword_cases[0]); i++) {
		const keyword_case *c = &keyword_cases[i];
		json_t *schema = parse(c->schema), *inst = parse(c->instance);
		int rc;

		if (!schema || !inst)
			goto next;
		mb_error_clear(&err);
		rc = mb_schema_validate(schema, inst, &report, &err);
		CHECK_MSG(rc == (c->valid ? 0 : MB_ESCHEMA), "%s on %s: rc %d (%s: %s)", c->schema, c->instance,
			rc, err.where, err.text);
		if (c->valid || rc != MB_ESCHEMA)
			goto next;
		CHECK_MSG(report.total >= 1 && report.count >= 1, "%s on %s: no issue kept", c->schema, c->instance);
		CHECK_MSG(report.count && !strcmp(report.items[0].pointer, c->pointer) &&
			!strcmp(report.items[0].keyword, c->keyword) &&
			(!c->message || strstr(report.items[0].message, c->message)),
			"%s on %s: want %s: %s: %s", c->schema, c->instance, c->pointer, c->keyword,
			c->message ? c->message : "*");
		if (report.count && (strcmp(report.items[0].pointer, c->pointer) || strcmp(report.items[0].keyword, c->keyword)))
			dump(&report);
		/* the same verdict when the caller keeps no report: err names the first issue */
		mb_error_clear(&err);
		rc = mb_schema_validate(schema, inst, NULL, &err);
		CHECK_MSG(rc == MB_ESCHEMA && err.code == MB_ESCHEMA && !strcmp(err.where, c->pointer) &&
			!strncmp(err.text, c->keyword, strlen(c->keyword)),
			"%s on %s without report: rc %d, err %s: %s", c->schema, c->instance, rc, err.where, err.text);
next:
		json_decref(schema);
		json_decref(inst);
	}
}

static void test_bad_schemas(void)
{
	mb_schema_report report;
	mb_error err;
	size_t i;

	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const bad_case *c = &bad_cases[i];
		json_t *schema = parse(c->schema), *inst = parse(c->instance);
		int rc;

		mb_error_clear(&err);
		rc = mb_schema_validate(schema, inst, &report, &err);
		CHECK_MSG(rc == c->code && err.code == c->code, "%s: want %s, got rc %d (%s: %s)", c->schema,
			mb_error_code_name(c->code), rc, err.where, err.text);
		CHECK_MSG(strstr(err.where, c->where) && strstr(err.text, c->text),
			"%s: want where ~ %s and text ~ %s, got %s: %s", c->schema, c->where, c->text, err.where, err.text);
		json_decref(schema);
		json_decref(inst);
	}
}

/* {"n": {"n": ... {"n": leaf}}} */
static json_t *nested(size_t depth, json_t *leaf)
{
	json_t *value = leaf, *outer;
	size_t i;

	for (i = 0; i < depth; i++) {
		outer = json_object();
		json_object_set_new(outer, "n", value);
		value = outer;
	}
	return value;
}

static void test_recursion_limits(void)
{
	json_t *schema = parse("{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"}}}");
	json_t *shallow = nested(SHALLOW_NESTING, json_object());
	json_t *deep = nested(DEEP_NESTING, json_object());
	json_t *bad_leaf = nested(SHALLOW_NESTING, json_integer(1));
	mb_schema_report report;
	mb_error err;
	char want[MB_SCHEMA_POINTER_MAX] = "";
	size_t i;

	CHECK(mb_schema_validate(schema, shallow, &report, NULL) == 0);
	CHECK(mb_schema_validate(schema, bad_leaf, &report, NULL) == MB_ESCHEMA);
	for (i = 0; i < SHALLOW_NESTING; i++)
		strcat(want, "/n");
	CHECK_MSG(report.count == 1 && !strcmp(report.items[0].pointer, want), "deep pointer %s",
		report.count ? report.items[0].pointer : "(none)");
	mb_error_clear(&err);
	CHECK(mb_schema_validate(schema, deep, &report, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "deeper than"), "depth error text: %s", err.text);
	json_decref(schema);
	json_decref(shallow);
	json_decref(deep);
	json_decref(bad_leaf);
}

static void test_report_limits(void)
{
	json_t *required = json_array(), *schema = json_object(), *inst = json_object();
	mb_schema_report report;
	mb_error err;
	char name[16], *text = NULL;
	size_t i, len = 0;
	FILE *out;

	for (i = 0; i < MANY_MISSING; i++) {
		snprintf(name, sizeof(name), "p%zu", i);
		json_array_append_new(required, json_string(name));
	}
	json_object_set_new(schema, "required", required);
	mb_error_clear(&err);
	CHECK(mb_schema_validate(schema, inst, &report, &err) == MB_ESCHEMA);
	CHECK(report.total == MANY_MISSING);
	CHECK(report.count == MB_SCHEMA_MAX_ISSUES);
	CHECK(!strcmp(report.items[MB_SCHEMA_MAX_ISSUES - 1].message, "missing required property \"p15\""));
	CHECK_MSG(strstr(err.text, "and 19 more issues"), "err text: %s", err.text);

	out = open_memstream(&text, &len);
	CHECK(out != NULL);
	if (out) {
		mb_schema_report_print(&report, "doc.json#", out);
		fclose(out);
		CHECK_MSG(text && !strncmp(text, "doc.json#: required: missing required property \"p0\"\n", 51),
			"printed: %s", text ? text : "(null)");
		CHECK(text && strstr(text, "4 more issues not shown"));
	}
	free(text);
	json_decref(schema);
	json_decref(inst);
}

static void test_arguments(void)
{
	json_t *schema = parse("{}");
	mb_error err;

	mb_error_clear(&err);
	CHECK(mb_schema_validate(NULL, schema, NULL, &err) == MB_EINVAL);
	CHECK(mb_schema_validate(schema, NULL, NULL, NULL) == MB_EINVAL);
	mb_schema_report_print(NULL, "x", stderr); /* must not crash */
	json_decref(schema);
}

static void test_builtin(void)
{
	static const char *const names[] = { "receipt", "suite", "catalog", "policy" };
	const json_t *schema, *again;
	json_t *empty = json_object();
	mb_error err;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		mb_error_clear(&err);
		schema = mb_schema_builtin(names[i], &err);
		CHECK_MSG(json_is_object(schema), "builtin %s: %s: %s", names[i], err.where, err.text);
		again = mb_schema_builtin(names[i], &err);
		CHECK_MSG(again == schema, "builtin %s is parsed once and cached", names[i]);
		/* every builtin schema is itself usable: refs resolve, regexes compile */
		if (schema)
			CHECK_MSG(mb_schema_validate(schema, empty, NULL, &err) != MB_EINVAL,
				"builtin %s: %s: %s", names[i], err.where, err.text);
	}
	mb_error_clear(&err);
	CHECK(mb_schema_builtin("nonsense", &err) == NULL);
	CHECK(err.code == MB_ENOTFOUND);
	CHECK(strstr(err.where, "nonsense") != NULL);
	json_decref(empty);
}

/* Edit one member of a document: `path` is "a/b/0/c" (no escapes), `value`
 * JSON text to set, or NULL to delete the member. */
static bool edit(json_t *doc, const char *path, const char *value)
{
	char buf[256], *seg, *next, *end;
	json_t *node = doc, *parent = NULL, *replacement = NULL;
	unsigned long index;

	snprintf(buf, sizeof(buf), "%s", path);
	for (seg = buf; seg && node; seg = next) {
		next = strchr(seg, '/');
		if (next)
			*next++ = '\0';
		parent = node;
		if (!next)
			break;
		if (json_is_array(node)) {
			index = strtoul(seg, &end, 10);
			node = json_array_get(node, index);
		} else {
			node = json_object_get(node, seg);
		}
	}
	if (!node || !parent)
		return false;
	if (value && !(replacement = parse(value)))
		return false;
	if (json_is_array(parent))
		return json_array_set_new(parent, strtoul(seg, &end, 10), replacement) == 0;
	if (!value)
		return json_object_del(parent, seg) == 0;
	return json_object_set_new(parent, seg, replacement) == 0;
}

typedef struct doc_case {
	const char *path;
	const char *value;   /* NULL deletes */
	const char *pointer; /* NULL: the edit keeps the document valid */
	const char *keyword;
	const char *message;
} doc_case;

static const doc_case receipt_cases[] = {
	{ "settings/seed", NULL, "/settings", "required", "missing required property \"seed\"" },
	{ "run_id", "\"XYZ\"", "/run_id", "pattern", "does not match pattern" },
	{ "cases/0/bogus", "1", "/cases/0/bogus", "additionalProperties", "property \"bogus\" is not allowed" },
	{ "cases/0/timing", "null", "/cases/0/timing", "type", "expected object, got null" },
	{ "cases/0/correctness/max_abs", "-1", "/cases/0/correctness/max_abs", "minimum",
	  "value -1 is less than minimum 0" },
	{ "cases/0/throughput/ceiling", "\"disk\"", "/cases/0/throughput/ceiling", "enum", NULL },
	{ "cases/1/error", "\"\"", "/cases/1/error", "minLength", NULL },
	{ "provenance/available", "true", "/provenance", "required", "missing required property \"commit\"" },
	{ "settings/modes", "[\"cold\",\"cold\"]", "/settings/modes", "uniqueItems", "items 0 and 1 are equal" },
	{ "goodput/goodput_fraction", "1.5", "/goodput/goodput_fraction", "maximum", NULL },
	{ "cases/0/shape/tokens", "0", "/cases/0/shape/tokens", "minimum", NULL },
	{ "schema_version", "3", "/schema_version", "enum", "value 3 is not one of [1,2]" },
	{ "started_at", "\"2026-01-02 03:04:05\"", "/started_at", "pattern", NULL },
	{ "host/cpu_count", "2.0", NULL, NULL, NULL },
	{ "cases/0/timing/samples_ns/1", "-3", "/cases/0/timing/samples_ns/1", "minimum", NULL },
};

static const doc_case suite_cases[] = {
	{ "rows/Bad", "{\"families\":[{\"name\":\"f\",\"axes\":{\"n\":1}}]}", "/rows/Bad", "propertyNames", NULL },
	{ "rows/rmsnorm/families/0/axes/hidden", "0", "/rows/rmsnorm/families/0/axes/hidden", "minimum",
	  "value 0 is less than minimum 1" },
	{ "rows/rmsnorm/families/0/axes/tokens", "[128,128]", "/rows/rmsnorm/families/0/axes/tokens",
	  "uniqueItems", NULL },
	{ "rows/rmsnorm/families/0/axes/tokens", "\"x\"", "/rows/rmsnorm/families/0/axes/tokens", "oneOf",
	  "expected integer, got string; expected array, got string" },
	{ "timing/max_noise", "0", "/timing/max_noise", "exclusiveMinimum", NULL },
	{ "rows", NULL, "", "required", "missing required property \"rows\"" },
	{ "suite/name", "\"-bad\"", "/suite/name", "pattern", NULL },
	{ "rows/rmsnorm/dtypes", "[\"fp8\"]", "/rows/rmsnorm/dtypes/0", "enum", NULL },
	{ "rows/rmsnorm/families/0/axes/hidden", "1024.0", NULL, NULL, NULL },
};

static void test_document(const char *schema_name, const char *doc_path, const doc_case *cases, size_t n)
{
	const json_t *schema = mb_schema_builtin(schema_name, NULL);
	json_t *doc = load(doc_path), *copy;
	mb_schema_report report;
	mb_error err;
	size_t i;
	int rc;

	if (!schema || !doc) {
		CHECK_MSG(false, "%s: schema or document missing", doc_path);
		goto cleanup;
	}
	mb_error_clear(&err);
	rc = mb_schema_validate(schema, doc, &report, &err);
	CHECK_MSG(rc == 0, "%s must be valid: rc %d (%s: %s)", doc_path, rc, err.where, err.text);
	if (rc)
		dump(&report);
	for (i = 0; i < n; i++) {
		copy = json_deep_copy(doc);
		CHECK_MSG(edit(copy, cases[i].path, cases[i].value), "%s: cannot edit %s", doc_path, cases[i].path);
		rc = mb_schema_validate(schema, copy, &report, &err);
		if (!cases[i].pointer) {
			CHECK_MSG(rc == 0, "%s with %s = %s must stay valid (rc %d)", doc_path, cases[i].path,
				cases[i].value, rc);
		} else {
			CHECK_MSG(rc == MB_ESCHEMA && has_issue(&report, cases[i].pointer, cases[i].keyword, cases[i].message),
				"%s with %s = %s: want %s: %s: %s (rc %d)", doc_path, cases[i].path,
				cases[i].value ? cases[i].value : "(deleted)", cases[i].pointer, cases[i].keyword,
				cases[i].message ? cases[i].message : "*", rc);
			if (rc == MB_ESCHEMA && !has_issue(&report, cases[i].pointer, cases[i].keyword, cases[i].message))
				dump(&report);
		}
		json_decref(copy);
	}
cleanup:
	json_decref(doc);
}

int main(void)
{
	test_keywords();
	test_bad_schemas();
	test_recursion_limits();
	test_report_limits();
	test_arguments();
	test_builtin();
	test_document("receipt", "tests/schema/receipt_valid.json", receipt_cases,
		sizeof(receipt_cases) / sizeof(receipt_cases[0]));
	test_document("suite", "tests/schema/suite_valid.json", suite_cases,
		sizeof(suite_cases) / sizeof(suite_cases[0]));
	return mb_test_finish("test_schema");
}
