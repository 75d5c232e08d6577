/* The validator's limits and its pattern engine (src/receipts/schema.c):
 * every input found to hang, crash or exhaust it before, now refused with a
 * one-line reason or answered in linear time; ECMA-262 patterns matched on
 * code points; any JSON value as schema and instance, from memory and from
 * files, with the file size limit. */
#include "receipts/schema.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Generous: these run under AddressSanitizer and valgrind too. What they
 * guard against took minutes, or never finished. */
#define FAST_SECONDS 20.0
#define CHAIN_LEVELS 40          /* an exponential walk of these would never end */
#define UNIQUE_ITEMS 100000
#define DEEP_PATTERN_GROUPS 20000
#define LONG_TEXT_BYTES 100000

typedef struct pattern_case {
	const char *pattern;   /* the JSON string's content, as C text */
	size_t pattern_len;    /* 0: strlen */
	const char *text;
	size_t text_len;       /* 0: strlen */
	bool match;
} pattern_case;

static const pattern_case pattern_cases[] = {
	/* code points, not bytes */
	{ "^.$", 0, "\xC3\xA9", 0, true },                 /* é */
	{ "^.$", 0, "\xF0\x9F\x98\x80", 0, true },         /* U+1F600, one code point */
	{ "^..$", 0, "\xF0\x9F\x98\x80", 0, false },
	{ "^[\xC3\xA0-\xC3\xBF]+$", 0, "\xC3\xA9\xC3\xA8", 0, true }, /* a range of non-ASCII code points */
	{ "^\\u00e9$", 0, "\xC3\xA9", 0, true },
	{ "^\\u{1F600}$", 0, "\xF0\x9F\x98\x80", 0, true },
	{ "^\\uD83D\\uDE00$", 0, "\xF0\x9F\x98\x80", 0, true },
	{ "^[^a]$", 0, "\xE2\x82\xAC", 0, true },          /* € is one "not a" */
	{ "\\w", 0, "\xC3\xA9", 0, false },                /* \w is ASCII only */
	/* the whole string: a NUL does not end it */
	{ "^[a-z]+$", 0, "ab\0cd", 5, false },
	{ "^ab\\0cd$", 0, "ab\0cd", 5, true },
	{ "cd", 0, "ab\0cd", 5, true },
	{ "^a.b$", 0, "a\0b", 3, true },
	/* ECMA-262, not POSIX */
	{ "^a$", 0, "a\n", 0, false },                     /* $ is the end, not a line end */
	{ "^a.c$", 0, "a\xE2\x80\xA8" "c", 0, false },     /* . stops at U+2028 */
	{ "^\\s$", 0, "\xC2\xA0", 0, true },               /* U+00A0 is white space */
	{ "^\\s$", 0, "\xEF\xBB\xBF", 0, true },           /* so is U+FEFF */
	{ "^\\S$", 0, "\xC2\xA0", 0, false },
	{ "^[^]$", 0, "\n", 0, true },                     /* [^] is any code point */
	{ "[]", 0, "a", 0, false },                        /* [] is none */
	{ "^[\\d-z]+$", 0, "1-z", 0, true },               /* - beside a class escape is a - */
	{ "^[\\D]$", 0, "x", 0, true },
	{ "^[\\W\\d]+$", 0, "-5", 0, true },
	{ "\\bfoo\\b", 0, "a foo.", 0, true },
	{ "\\bfoo\\b", 0, "afoo", 0, false },
	{ "\\Boo", 0, "foo", 0, true },
	{ "^x{,5}$", 0, "x{,5}", 0, true },                 /* not a quantifier: literal */
	{ "^a{2}$", 0, "aa", 0, true },
	{ "^a{2,}$", 0, "aaaaa", 0, true },
	{ "^a{2,}?$", 0, "a", 0, false },
	{ "^(?:ab|cd){2}$", 0, "abcd", 0, true },
	{ "^(?<year>[0-9]{4})-", 0, "2026-", 0, true },
	{ "^(a|)+$", 0, "aaa", 0, true },                   /* an empty loop ends */
	{ "^(a*)*b$", 0, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac", 0, false }, /* no backtracking */
	{ "^(a|a)*$", 0, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", 0, false },
	{ "^\\cJ$", 0, "\n", 0, true },
	{ "^\\x41$", 0, "A", 0, true },
	{ "^[\\b]$", 0, "\b", 0, true },
	{ "^\\/\\.\\*$", 0, "/.*", 0, true },
	{ "a|b|c", 0, "xxc", 0, true },
	{ "^$", 0, "", 0, true },
	{ "", 0, "", 0, true },
};

typedef struct bad_pattern {
	const char *pattern;
	const char *text; /* a part of err.text */
} bad_pattern;

static const bad_pattern bad_patterns[] = {
	{ "(a)\\1", "back-references" },
	{ "(?<n>a)\\k<n>", "back-references" },
	{ "(?=a)", "lookaround" },
	{ "(?<!a)b", "lookaround" },
	{ "\\p{L}", "Unicode property escapes" },
	{ "(a{1,32767}){1,32767}", "repetition count above 1000" },
	{ "((a{100}){100})", "too complex" },
	{ "((((){1000}){1000}){1000})", "too complex" },
	{ "a**", "nothing to repeat" },
	{ "*a", "nothing to repeat" },
	{ "^*", "nothing to repeat" },
	{ "a{3,2}", "out of order" },
	{ "[z-a]", "out of order" },
	{ "(a", "missing )" },
	{ "a)", "unmatched )" },
	{ "[a", "unterminated" },
	{ "\\", "trailing backslash" },
	{ "\\q", "escape not supported" },
	{ "\\u12", "bad \\u escape" },
	{ "(?<>a)", "bad group name" },
	{ "(?x)", "invalid group" },
};

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

static json_t *parse(const char *text)
{
	json_error_t error;
	json_t *value = json_loads(text, JSON_DECODE_ANY, &error);

	CHECK_MSG(value != NULL, "cannot parse test JSON %.60s: %s", text, error.text);
	return value;
}

/* {"pattern": P} against the string T: 0 valid, MB_ESCHEMA, or a failure. */
static int match_pattern(const char *pattern, size_t pattern_len, const char *text, size_t text_len, mb_error *err)
{
	json_t *schema = json_object(), *inst = json_stringn_nocheck(text, text_len);
	int rc;

	json_object_set_new(schema, "pattern", json_stringn_nocheck(pattern, pattern_len));
	mb_error_clear(err);
	rc = mb_schema_validate(schema, inst, NULL, err);
	json_decref(schema);
	json_decref(inst);
	return rc;
}

static void test_patterns(void)
{
	mb_error err;
	size_t i;

	for (i = 0; i < sizeof(pattern_cases) / sizeof(pattern_cases[0]); i++) {
		const pattern_case *c = &pattern_cases[i];
		size_t plen = c->pattern_len ? c->pattern_len : strlen(c->pattern);
		size_t tlen = c->text_len ? c->text_len : strlen(c->text);
		int rc = match_pattern(c->pattern, plen, c->text, tlen, &err);

		CHECK_MSG(rc == (c->match ? 0 : MB_ESCHEMA), "pattern %s on case %zu: rc %d (%s: %s)", c->pattern, i, rc,
			err.where, err.text);
	}
	for (i = 0; i < sizeof(bad_patterns) / sizeof(bad_patterns[0]); i++) {
		const bad_pattern *c = &bad_patterns[i];
		int rc = match_pattern(c->pattern, strlen(c->pattern), "a", 1, &err);

		CHECK_MSG(rc == MB_EINVAL && strstr(err.text, "bad regex") && strstr(err.text, c->text),
			"pattern %s: want bad regex ~ %s, got rc %d: %s", c->pattern, c->text, rc, err.text);
	}
}

/* 20,000 nested groups overflowed the stack in glibc's regcomp. */
static void test_deep_pattern(void)
{
	char *pattern = malloc(2 * DEEP_PATTERN_GROUPS + 2), group[2 * 40 + 2];
	mb_error err;
	size_t i;
	int rc;

	if (!pattern)
		return;
	memset(pattern, '(', DEEP_PATTERN_GROUPS);
	pattern[DEEP_PATTERN_GROUPS] = 'a';
	memset(pattern + DEEP_PATTERN_GROUPS + 1, ')', DEEP_PATTERN_GROUPS);
	rc = match_pattern(pattern, 2 * DEEP_PATTERN_GROUPS + 1, "a", 1, &err);
	CHECK_MSG(rc == MB_EINVAL && strstr(err.text, "longer than 4096 bytes") && !strchr(err.text, '\n'),
		"deep pattern: rc %d: %s", rc, err.text);
	/* within the length limit, nesting has its own */
	for (i = 0; i < 40; i++) {
		group[i] = '(';
		group[41 + i] = ')';
	}
	group[40] = 'a';
	group[81] = '\0';
	rc = match_pattern(group, strlen(group), "a", 1, &err);
	CHECK_MSG(rc == MB_EINVAL && strstr(err.text, "groups nest deeper than 32 levels"), "40 groups: rc %d: %s", rc,
		err.text);
	rc = match_pattern(group + 10, 61, "a", 1, &err); /* 30 groups: fine */
	CHECK_MSG(rc == 0, "30 groups: rc %d: %s", rc, err.text);
	free(pattern);
}

/* Matching draws on a budget proportional to the text: a pattern with a
 * thousand live threads per position over 100 kB would need 10^8 steps. */
static void test_match_budget(void)
{
	char *text = malloc(LONG_TEXT_BYTES);
	struct timespec t0;
	mb_error err;
	int rc;

	if (!text)
		return;
	memset(text, 'a', LONG_TEXT_BYTES);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = match_pattern("[a-z]{0,1000}x", 14, text, LONG_TEXT_BYTES, &err);
	CHECK_MSG(rc == MB_EINVAL && strstr(err.text, "refused: matching") && strstr(err.where, "pattern"),
		"match budget: rc %d: %s: %s", rc, err.where, err.text);
	CHECK_MSG(seconds_since(&t0) < FAST_SECONDS, "match budget took %.1f s", seconds_since(&t0));
	/* an ordinary pattern over the same text is no trouble */
	rc = match_pattern("^[a-z]+$", 8, text, LONG_TEXT_BYTES, &err);
	CHECK_MSG(rc == 0, "long text: rc %d: %s", rc, err.text);
	free(text);
}

/* definitions d0..dN: d_i = {KEYWORD: [{$ref d_i+1}, {$ref d_i+1}]},
 * d_N = {"type": "string"}. Walked path by path it is 2^N. */
static json_t *ref_chain(const char *keyword, int levels)
{
	json_t *defs = json_object(), *schema = json_object();
	char name[32], ref[64];
	int i;

	for (i = 0; i < levels; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		snprintf(ref, sizeof(ref), "#/definitions/d%d", i + 1);
		json_object_set_new(defs, name, json_pack("{s:[{s:s},{s:s}]}", keyword, "$ref", ref, "$ref", ref));
	}
	snprintf(name, sizeof(name), "d%d", levels);
	json_object_set_new(defs, name, json_pack("{s:s}", "type", "string"));
	json_object_set_new(schema, "definitions", defs);
	json_object_set_new(schema, "$ref", json_string("#/definitions/d0"));
	return schema;
}

static void test_ref_chains(void)
{
	static const char *const keywords[] = { "anyOf", "oneOf", "allOf" };
	json_t *number = json_integer(1), *text = json_string("x"), *schema;
	mb_schema_report report;
	struct timespec t0;
	mb_error err;
	size_t k;
	int rc;

	for (k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++) {
		schema = ref_chain(keywords[k], CHAIN_LEVELS);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		mb_error_clear(&err);
		rc = mb_schema_validate(schema, number, &report, &err);
		CHECK_MSG(rc == MB_ESCHEMA && report.count >= 1, "%s chain on 1: rc %d (%s: %s)", keywords[k], rc,
			err.where, err.text);
		mb_error_clear(&err);
		rc = mb_schema_validate(schema, number, NULL, &err);
		CHECK_MSG(rc == MB_ESCHEMA, "%s chain on 1 without report: rc %d", keywords[k], rc);
		rc = mb_schema_validate(schema, text, &report, &err);
		/* oneOf of two equal branches never has exactly one match */
		CHECK_MSG(rc == (k == 1 ? MB_ESCHEMA : 0), "%s chain on \"x\": rc %d (%s)", keywords[k], rc, err.text);
		CHECK_MSG(seconds_since(&t0) < FAST_SECONDS, "%s chain of %d levels took %.1f s", keywords[k],
			CHAIN_LEVELS, seconds_since(&t0));
		json_decref(schema);
	}
	json_decref(number);
	json_decref(text);
}

static void test_unique_items(void)
{
	json_t *schema = json_pack("{s:b}", "uniqueItems", 1), *items = json_array(), *dup;
	mb_schema_report report;
	struct timespec t0;
	size_t i;
	int rc;

	for (i = 0; i < UNIQUE_ITEMS; i++)
		json_array_append_new(items, json_integer((json_int_t)i));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = mb_schema_validate(schema, items, &report, NULL);
	CHECK_MSG(rc == 0, "%d distinct integers: rc %d", UNIQUE_ITEMS, rc);
	/* duplicates: 1.0 equals 1, reported at the first later equal item, in order */
	json_array_append_new(items, json_real(7.0));
	json_array_append_new(items, json_integer(3));
	json_array_append_new(items, json_integer(7));
	rc = mb_schema_validate(schema, items, &report, NULL);
	CHECK_MSG(rc == MB_ESCHEMA && report.total == 3, "duplicates: rc %d, total %zu", rc, report.total);
	CHECK_MSG(report.count == 3 && !strcmp(report.items[0].message, "items 3 and 100001 are equal")
		&& !strcmp(report.items[1].message, "items 7 and 100000 are equal")
		&& !strcmp(report.items[2].message, "items 100000 and 100002 are equal"),
		"duplicate pairs: %s; %s; %s", report.count > 0 ? report.items[0].message : "",
		report.count > 1 ? report.items[1].message : "", report.count > 2 ? report.items[2].message : "");
	CHECK_MSG(seconds_since(&t0) < FAST_SECONDS, "uniqueItems took %.1f s", seconds_since(&t0));
	json_decref(items);
	/* objects equal whatever their key order, arrays by position, 1 == 1.0 inside */
	items = parse("[{\"a\":1,\"b\":[1,2]},{\"c\":null},\"x\",true,false,null,[1],[1.5],{\"b\":[1.0,2],\"a\":1.0},0]");
	rc = mb_schema_validate(schema, items, &report, NULL);
	CHECK_MSG(rc == MB_ESCHEMA && report.total == 1 && !strcmp(report.items[0].message, "items 0 and 8 are equal"),
		"nested duplicates: rc %d: %s", rc, report.count ? report.items[0].message : "");
	dup = parse("[0,false,\"0\",[],{},null,[0],[false],{\"0\":0},0.5]");
	rc = mb_schema_validate(schema, dup, &report, NULL);
	CHECK_MSG(rc == 0, "values of different types are different: rc %d: %s", rc,
		report.count ? report.items[0].message : "");
	json_decref(dup);
	json_decref(items);
	json_decref(schema);
}

static void test_large_enum(void)
{
	json_t *values = json_array(), *schema, *inst;
	mb_schema_report report;
	struct timespec t0;
	size_t i;
	int rc;

	for (i = 0; i < UNIQUE_ITEMS; i++)
		json_array_append_new(values, json_integer((json_int_t)(i * 2)));
	schema = json_pack("{s:{s:o}}", "items", "enum", values);
	inst = json_array();
	for (i = 0; i < UNIQUE_ITEMS; i++)
		json_array_append_new(inst, i % 2 ? json_real((double)(i * 2)) : json_integer((json_int_t)(i * 2)));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = mb_schema_validate(schema, inst, &report, NULL);
	CHECK_MSG(rc == 0, "large enum: rc %d: %s", rc, report.count ? report.items[0].message : "");
	json_array_append_new(inst, json_integer(3));
	rc = mb_schema_validate(schema, inst, &report, NULL);
	CHECK_MSG(rc == MB_ESCHEMA && report.count == 1 && !strcmp(report.items[0].pointer, "/100000"),
		"large enum miss: rc %d", rc);
	CHECK_MSG(seconds_since(&t0) < FAST_SECONDS, "large enum took %.1f s", seconds_since(&t0));
	json_decref(inst);
	json_decref(schema);
}

/* [[[...]]] `depth` levels */
static json_t *nested_arrays(size_t depth)
{
	json_t *value = json_array(), *outer;
	size_t i;

	for (i = 0; i < depth; i++) {
		outer = json_array();
		json_array_append_new(outer, value);
		value = outer;
	}
	return value;
}

static void test_nesting(void)
{
	json_t *schema = parse("{\"items\":{}}"), *deep = nested_arrays(MB_SCHEMA_MAX_NESTING + 10);
	json_t *ok = nested_arrays(MB_SCHEMA_MAX_NESTING - 10), *deep_const;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = mb_schema_validate(schema, deep, NULL, &err);
	CHECK_MSG(rc == MB_EINVAL && strstr(err.text, "nest deeper than 512 levels"), "deep instance: rc %d: %s", rc,
		err.text);
	CHECK(mb_schema_validate(schema, ok, NULL, &err) == 0);
	deep_const = json_pack("{s:O}", "const", deep);
	mb_error_clear(&err);
	rc = mb_schema_validate(deep_const, ok, NULL, &err);
	CHECK_MSG(rc == MB_EINVAL && !strcmp(err.where, "schema") && strstr(err.text, "nest deeper"),
		"deep schema: rc %d: %s: %s", rc, err.where, err.text);
	json_decref(deep_const);
	json_decref(schema);
	json_decref(deep);
	json_decref(ok);
}

/* Keys and values may hold line breaks; messages never do. */
static void test_one_line_messages(void)
{
	json_t *schema = parse("{\"additionalProperties\":false,\"properties\":{\"p\":{\"pattern\":\"^x$\"}}}");
	json_t *inst = json_object();
	mb_schema_report report;
	size_t i;

	json_object_set_new(inst, "a\nb", json_integer(1));
	json_object_set_new(inst, "p", json_string("y\n\tz"));
	CHECK(mb_schema_validate(schema, inst, &report, NULL) == MB_ESCHEMA);
	CHECK(report.count == 2);
	for (i = 0; i < report.count; i++)
		CHECK_MSG(!strpbrk(report.items[i].pointer, "\n\t") && !strpbrk(report.items[i].message, "\n\t"),
			"issue %zu spans lines: %s: %s", i, report.items[i].pointer, report.items[i].message);
	CHECK_MSG(report.count && !strcmp(report.items[0].pointer, "/a\\nb"), "escaped pointer: %s",
		report.count ? report.items[0].pointer : "");
	json_decref(schema);
	json_decref(inst);
}

/* Any JSON value is a document: draft-07 has boolean schemas, and an
 * instance may be a number, a string, a boolean or null. */
static void test_any_document(void)
{
	static const struct {
		const char *schema, *instance;
		int rc;
	} cases[] = {
		{ "true", "1", 0 },
		{ "false", "1", MB_ESCHEMA },
		{ "true", "null", 0 },
		{ "{\"type\":\"integer\"}", "12", 0 },
		{ "{\"type\":\"integer\"}", "\"12\"", MB_ESCHEMA },
		{ "{\"maxLength\":2}", "\"abc\"", MB_ESCHEMA },
		{ "{\"const\":false}", "false", 0 },
		{ "{\"type\":\"null\"}", "  null  ", 0 },
		/* counts beyond size_t are as good as infinite (found by fuzz_schema:
		 * casting them was undefined, and could make a minimum of 0) */
		{ "{\"maxLength\":1e124}", "\"abc\"", 0 },
		{ "{\"minLength\":1e30}", "\"abc\"", MB_ESCHEMA },
		{ "{\"minItems\":18446744073709551616.0}", "[1]", MB_ESCHEMA },
	};
	json_t *schema = NULL, *inst = NULL;
	mb_error err;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mb_error_clear(&err);
		rc = mb_schema_load_buffer(&schema, cases[i].schema, strlen(cases[i].schema), "schema.json", &err);
		if (!rc)
			rc = mb_schema_load_buffer(&inst, cases[i].instance, strlen(cases[i].instance), "inst.json", &err);
		CHECK_MSG(rc == 0, "load %s / %s: %s: %s", cases[i].schema, cases[i].instance, err.where, err.text);
		if (!rc) {
			rc = mb_schema_validate(schema, inst, NULL, &err);
			CHECK_MSG(rc == cases[i].rc, "%s on %s: rc %d", cases[i].schema, cases[i].instance, rc);
		}
		json_decref(schema);
		json_decref(inst);
		schema = inst = NULL;
	}
	mb_error_clear(&err);
	rc = mb_schema_load_buffer(&schema, "{\"a\":1,\"a\":2}", 13, "dup.json", &err);
	CHECK_MSG(rc == MB_EINVAL && !strncmp(err.where, "dup.json:1:", 11) && strstr(err.text, "not valid JSON"),
		"duplicate keys: rc %d: %s: %s", rc, err.where, err.text);
	rc = mb_schema_load_buffer(&schema, "[1,", 3, "cut.json", &err);
	CHECK(rc == MB_EINVAL && schema == NULL);
}

static void test_files(void)
{
	char dir[] = "/tmp/mb-schema-limits-XXXXXX", path[256];
	json_t *doc = NULL;
	mb_error err;
	FILE *f;
	int rc;

	if (!mkdtemp(dir)) {
		CHECK_MSG(false, "mkdtemp failed");
		return;
	}
	snprintf(path, sizeof(path), "%s/scalar.json", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("\"just a string\"\n", f);
		fclose(f);
	}
	mb_error_clear(&err);
	rc = mb_schema_load_file(&doc, path, &err);
	CHECK_MSG(rc == 0 && json_is_string(doc), "scalar file: rc %d: %s", rc, err.text);
	json_decref(doc);
	doc = NULL;
	/* one byte over the limit: refused before a byte is read (the file is
	 * sparse, so this costs nothing) */
	snprintf(path, sizeof(path), "%s/huge.json", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		CHECK(ftruncate(fileno(f), (off_t)MB_SCHEMA_FILE_MAX_BYTES + 1) == 0);
		fclose(f);
	}
	mb_error_clear(&err);
	rc = mb_schema_load_file(&doc, path, &err);
	CHECK_MSG(rc == MB_EIO && !strcmp(err.where, path) && strstr(err.text, "larger than 268435456 bytes"),
		"huge file: rc %d: %s: %s", rc, err.where, err.text);
	CHECK(doc == NULL);
	remove(path);
	snprintf(path, sizeof(path), "%s/scalar.json", dir);
	remove(path);
	mb_error_clear(&err);
	rc = mb_schema_load_file(&doc, path, &err);
	CHECK_MSG(rc == MB_ENOTFOUND && strstr(err.text, "cannot open"), "missing file: rc %d: %s", rc, err.text);
	rmdir(dir);
}

int main(void)
{
	test_patterns();
	test_deep_pattern();
	test_match_budget();
	test_ref_chains();
	test_unique_items();
	test_large_enum();
	test_nesting();
	test_one_line_messages();
	test_any_document();
	test_files();
	return mb_test_finish("test_schema_limits");
}
