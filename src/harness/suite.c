/* Suite loading: bytes, TOML, schema, then the checks a schema cannot make.
 *
 * When the schema rejects a suite, the validator says where; we then phrase
 * the first problem in file order ourselves (explain_* below), because a
 * message such as "expected a positive integer, got -4" helps an author more
 * than "minimum: -4 < 1", and because oneOf failures otherwise only say that
 * no alternative matched. Anything our phrasing does not recognise falls back
 * to the validator's own words, so the validator stays the only judge.
 */
#include "harness/suite.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/suite_internal.h"
#include "receipts/toml_json.h"
#include "receipts/provenance.h"
#include "receipts/schema.h"

/* How deep $ref chains may go before we call the schema cyclic. */
#define REF_DEPTH_MAX 16
/* A family whose axis lists multiply past this is a typo, not a suite. */
#define SUITE_MAX_SHAPES_PER_FAMILY 100000

static const char *const mode_names[MB_MODE_COUNT] = {"cold", "hot", "graph"};

const char *mb_mode_name(mb_mode mode)
{
	return (unsigned)mode < MB_MODE_COUNT ? mode_names[mode] : "unknown";
}

int mb_mode_parse(const char *name, mb_mode *out)
{
	for (int m = 0; m < MB_MODE_COUNT; m++) {
		if (name && strcmp(name, mode_names[m]) == 0) {
			*out = (mb_mode)m;
			return 0;
		}
	}
	return MB_ENOTFOUND;
}

/* --- key paths ---------------------------------------------------------- */

static bool is_bare_key(const char *key)
{
	if (!*key)
		return false;
	for (const char *p = key; *p; p++) {
		char c = *p;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			c == '_' || c == '-'))
			return false;
	}
	return true;
}

void mb_keypath_key(char *out, size_t len, const char *parent, const char *key)
{
	const char *dot = parent && *parent ? "." : "";
	char quoted[MB_ERROR_WHERE_MAX];
	char joined[MB_ERROR_WHERE_MAX];
	size_t q = 0;

	if (is_bare_key(key)) {
		snprintf(quoted, sizeof(quoted), "%s", key);
	} else {
		quoted[q++] = '"';
		for (const char *p = key; *p && q + 3 < sizeof(quoted); p++) {
			if (*p == '"' || *p == '\\')
				quoted[q++] = '\\';
			quoted[q++] = *p;
		}
		quoted[q++] = '"';
		quoted[q] = '\0';
	}
	/* Through a copy: callers extend a path in place. */
	snprintf(joined, sizeof(joined), "%s%s%s", parent ? parent : "", dot, quoted);
	snprintf(out, len, "%s", joined);
}

void mb_keypath_index(char *out, size_t len, const char *parent, size_t index)
{
	char joined[MB_ERROR_WHERE_MAX];

	snprintf(joined, sizeof(joined), "%s[%zu]", parent, index);
	snprintf(out, len, "%s", joined);
}

void mb_suite_where(char *out, size_t len, const char *path, const char *keypath)
{
	snprintf(out, len, "%s: %s", path, keypath && *keypath ? keypath : "(top level)");
}

/* A JSON pointer into `doc` as a TOML key path: arrays give [i], objects .key. */
static void pointer_to_keypath(char *out, size_t len, const json_t *doc, const char *pointer)
{
	char seg[MB_SCHEMA_POINTER_MAX];
	char next[MB_ERROR_WHERE_MAX];
	const json_t *cur = doc;
	const char *p = pointer;

	out[0] = '\0';
	while (*p == '/') {
		size_t n = 0;
		for (p++; *p && *p != '/' && n + 1 < sizeof(seg); p++) {
			if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
				seg[n++] = p[1] == '0' ? '~' : '/';
				p++;
			} else {
				seg[n++] = *p;
			}
		}
		seg[n] = '\0';
		if (json_is_array(cur)) {
			size_t index = strtoul(seg, NULL, 10);
			mb_keypath_index(next, sizeof(next), out, index);
			cur = json_array_get(cur, index);
		} else {
			mb_keypath_key(next, sizeof(next), out, seg);
			cur = json_object_get(cur, seg);
		}
		snprintf(out, len, "%s", next);
	}
}

/* --- phrasing schema failures ------------------------------------------- */

typedef struct explain_ctx {
	const json_t *root;
	char keypath[MB_ERROR_WHERE_MAX];
	char text[MB_ERROR_TEXT_MAX];
} explain_ctx;

/* Patterns the schemas use, in words. */
static const struct {
	const char *pattern;
	const char *words;
} pattern_words[] = {
	{"^[a-z][a-z0-9_]*$", "a name of lowercase letters, digits and _ that starts with a letter"},
	{"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
	 "a name of letters, digits, _, . and - that starts with a letter or digit"},
	{"^[A-Za-z][A-Za-z0-9_]*$", "a name of letters, digits and _ that starts with a letter"},
};

static const json_t *resolve_ref(const json_t *root, const json_t *schema)
{
	for (int depth = 0; depth < REF_DEPTH_MAX; depth++) {
		const char *ref = json_string_value(json_object_get(schema, "$ref"));
		char seg[MB_SCHEMA_POINTER_MAX];
		const json_t *cur = root;

		if (!ref)
			return schema;
		if (ref[0] != '#')
			return NULL;
		for (const char *p = ref + 1; *p == '/' && cur;) {
			size_t n = 0;
			for (p++; *p && *p != '/' && n + 1 < sizeof(seg); p++)
				seg[n++] = *p;
			seg[n] = '\0';
			cur = json_object_get(cur, seg);
		}
		schema = cur;
	}
	return NULL;
}

static void format_number(char *out, size_t len, const json_t *v)
{
	/* Shortest text that reads back to the same double. */
	enum { short_digits = 15, full_digits = 17 };

	if (json_is_integer(v)) {
		snprintf(out, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return;
	}
	snprintf(out, len, "%.*g", short_digits, json_real_value(v));
	if (strtod(out, NULL) != json_real_value(v))
		snprintf(out, len, "%.*g", full_digits, json_real_value(v));
	/* A float that prints like an integer still reads as a float: 8.0. */
	if (!strpbrk(out, ".e") && strlen(out) + 2 < len)
		strcat(out, ".0");
}

static void describe_value(char *out, size_t len, const json_t *v)
{
	char num[64];

	switch (json_typeof(v)) {
	case JSON_STRING:
		snprintf(out, len, "string \"%s\"", json_string_value(v));
		break;
	case JSON_INTEGER:
	case JSON_REAL:
		format_number(num, sizeof(num), v);
		snprintf(out, len, "%s%s", json_is_real(v) ? "float " : "", num);
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		snprintf(out, len, "boolean %s", json_is_true(v) ? "true" : "false");
		break;
	case JSON_ARRAY:
		snprintf(out, len, "an array");
		break;
	case JSON_OBJECT:
		snprintf(out, len, "a table");
		break;
	default:
		snprintf(out, len, "null");
		break;
	}
}

static bool type_name_matches(const char *type, const json_t *v)
{
	/* Stricter than draft-07, which lets 8.0 pass as an integer: TOML tells
	 * floats from integers, and a float token count is a typo. */
	if (strcmp(type, "integer") == 0)
		return json_is_integer(v);
	if (strcmp(type, "number") == 0)
		return json_is_number(v);
	if (strcmp(type, "string") == 0)
		return json_is_string(v);
	if (strcmp(type, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(type, "array") == 0)
		return json_is_array(v);
	if (strcmp(type, "object") == 0)
		return json_is_object(v);
	if (strcmp(type, "null") == 0)
		return json_is_null(v);
	return true;
}

static bool type_matches(const json_t *schema, const json_t *v)
{
	const json_t *type = json_object_get(schema, "type");
	size_t i;
	const json_t *t;

	if (json_is_string(type))
		return type_name_matches(json_string_value(type), v);
	if (!json_is_array(type))
		return true;
	json_array_foreach(type, i, t) {
		if (json_is_string(t) && type_name_matches(json_string_value(t), v))
			return true;
	}
	return false;
}

/* "a positive integer", "a number from 0 to 3600", "an integer >= 2". */
static void phrase_number(char *out, size_t len, const json_t *schema, bool integer)
{
	const json_t *min = json_object_get(schema, "minimum");
	const json_t *xmin = json_object_get(schema, "exclusiveMinimum");
	const json_t *max = json_object_get(schema, "maximum");
	const json_t *xmax = json_object_get(schema, "exclusiveMaximum");
	const json_t *lo = json_is_number(min) ? min : (json_is_number(xmin) ? xmin : NULL);
	const json_t *hi = json_is_number(max) ? max : (json_is_number(xmax) ? xmax : NULL);
	const char *noun = integer ? "an integer" : "a number";
	char los[64] = "", his[64] = "";

	if (lo)
		format_number(los, sizeof(los), lo);
	if (hi)
		format_number(his, sizeof(his), hi);
	if (lo == min && lo && json_number_value(lo) == 1 && integer && !hi)
		snprintf(out, len, "a positive integer");
	else if (lo == xmin && lo && json_number_value(lo) == 0 && !hi)
		snprintf(out, len, "a positive %s", integer ? "integer" : "number");
	else if (lo == min && lo && json_number_value(lo) == 0 && !hi)
		snprintf(out, len, "a non-negative %s", integer ? "integer" : "number");
	else if (lo == min && hi == max && lo && hi)
		snprintf(out, len, "%s from %s to %s", noun, los, his);
	else if (lo && hi)
		snprintf(out, len, "%s %s %s and %s %s", noun, lo == min ? ">=" : ">", los,
			hi == max ? "<=" : "<", his);
	else if (lo)
		snprintf(out, len, "%s %s %s", noun, lo == min ? ">=" : ">", los);
	else if (hi)
		snprintf(out, len, "%s %s %s", noun, hi == max ? "<=" : "<", his);
	else
		snprintf(out, len, "%s", noun);
}

static void phrase_schema(char *out, size_t len, const json_t *root, const json_t *schema);

static void phrase_enum(char *out, size_t len, const json_t *values)
{
	size_t i, used;
	const json_t *v;

	used = (size_t)snprintf(out, len, "one of ");
	json_array_foreach(values, i, v) {
		char one[128];
		if (json_is_string(v))
			snprintf(one, sizeof(one), "\"%s\"", json_string_value(v));
		else
			format_number(one, sizeof(one), v);
		if (used < len)
			used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "", one);
	}
}

static void phrase_array(char *out, size_t len, const json_t *root, const json_t *schema)
{
	const json_t *items = resolve_ref(root, json_object_get(schema, "items"));
	char item[256];

	if (!json_is_object(items)) {
		snprintf(out, len, "an array");
		return;
	}
	phrase_schema(item, sizeof(item), root, items);
	/* "a positive integer" -> "an array of positive integers". */
	if (strncmp(item, "a ", 2) == 0 && !strchr(item + 2, ' '))
		snprintf(out, len, "an array of %ss", item + 2);
	else if (strncmp(item, "an ", 3) == 0 && !strchr(item + 3, ' '))
		snprintf(out, len, "an array of %ss", item + 3);
	else if (strncmp(item, "a ", 2) == 0 && strchr(item + 2, ' ') &&
		!strchr(strchr(item + 2, ' ') + 1, ' '))
		snprintf(out, len, "an array of %ss", item + 2);
	else
		snprintf(out, len, "an array of %s", item);
}

static void phrase_string(char *out, size_t len, const json_t *schema)
{
	const char *pattern = json_string_value(json_object_get(schema, "pattern"));

	if (!pattern) {
		snprintf(out, len, "a string");
		return;
	}
	for (size_t i = 0; i < sizeof(pattern_words) / sizeof(pattern_words[0]); i++) {
		if (strcmp(pattern, pattern_words[i].pattern) == 0) {
			snprintf(out, len, "%s", pattern_words[i].words);
			return;
		}
	}
	snprintf(out, len, "a string matching %s", pattern);
}

/* What `schema` expects, in words, for "expected X, got Y". */
static void phrase_schema(char *out, size_t len, const json_t *root, const json_t *schema)
{
	const json_t *en = json_object_get(schema, "enum");
	const char *type = json_string_value(json_object_get(schema, "type"));

	if (json_is_array(en))
		phrase_enum(out, len, en);
	else if (!type)
		snprintf(out, len, "a valid value");
	else if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0)
		phrase_number(out, len, schema, strcmp(type, "integer") == 0);
	else if (strcmp(type, "string") == 0)
		phrase_string(out, len, schema);
	else if (strcmp(type, "array") == 0)
		phrase_array(out, len, root, schema);
	else if (strcmp(type, "object") == 0)
		snprintf(out, len, "a table");
	else if (strcmp(type, "boolean") == 0)
		snprintf(out, len, "true or false");
	else
		snprintf(out, len, "%s", type);
}

static bool fail_expected(explain_ctx *c, const json_t *schema, const json_t *v, const char *path)
{
	char want[512], got[256];

	phrase_schema(want, sizeof(want), c->root, schema);
	describe_value(got, sizeof(got), v);
	snprintf(c->keypath, sizeof(c->keypath), "%s", path);
	snprintf(c->text, sizeof(c->text), "expected %s, got %s", want, got);
	return true;
}

static bool number_in_bounds(const json_t *schema, const json_t *v)
{
	double x = json_number_value(v);
	const json_t *b;

	if ((b = json_object_get(schema, "minimum")) && json_is_number(b) && x < json_number_value(b))
		return false;
	if ((b = json_object_get(schema, "exclusiveMinimum")) && json_is_number(b) &&
		x <= json_number_value(b))
		return false;
	if ((b = json_object_get(schema, "maximum")) && json_is_number(b) && x > json_number_value(b))
		return false;
	if ((b = json_object_get(schema, "exclusiveMaximum")) && json_is_number(b) &&
		x >= json_number_value(b))
		return false;
	return true;
}

/* -1: the pattern does not compile here, so we cannot judge. */
static int pattern_matches(const char *pattern, const char *s)
{
	regex_t re;
	int rc;

	if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB))
		return -1;
	rc = regexec(&re, s, 0, NULL, 0) == 0;
	regfree(&re);
	return rc;
}

static bool explain(explain_ctx *c, const json_t *schema, const json_t *v, const char *path);

static bool explain_alternatives(explain_ctx *c, const json_t *alts, const json_t *v,
	const char *path)
{
	size_t i, used = 0;
	const json_t *alt;
	char want[512], got[256];

	/* Pick the alternative meant for this kind of value and explain
	 * against it: "-4" fails "positive integer", not "one of two". */
	json_array_foreach(alts, i, alt) {
		const json_t *r = resolve_ref(c->root, alt);
		if (r && json_object_get(r, "type") && type_matches(r, v))
			return explain(c, r, v, path);
	}
	want[0] = '\0';
	json_array_foreach(alts, i, alt) {
		char one[256];
		const json_t *r = resolve_ref(c->root, alt);
		if (!r)
			return false;
		phrase_schema(one, sizeof(one), c->root, r);
		if (used < sizeof(want))
			used += (size_t)snprintf(want + used, sizeof(want) - used, "%s%s",
				i ? " or " : "", one);
	}
	describe_value(got, sizeof(got), v);
	snprintf(c->keypath, sizeof(c->keypath), "%s", path);
	snprintf(c->text, sizeof(c->text), "expected %s, got %s", want, got);
	return true;
}

static bool explain_object_keys(explain_ctx *c, const json_t *schema, const json_t *v,
	const char *path)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *extra = json_object_get(schema, "additionalProperties");
	const json_t *names = resolve_ref(c->root, json_object_get(schema, "propertyNames"));
	const char *key;
	const json_t *child;
	char sub[MB_ERROR_WHERE_MAX];

	json_object_foreach((json_t *)v, key, child) {
		mb_keypath_key(sub, sizeof(sub), path, key);
		if (json_is_object(names)) {
			json_t *name = json_string(key);
			bool bad = name && explain(c, names, name, sub);
			json_decref(name);
			if (bad) {
				snprintf(c->keypath, sizeof(c->keypath), "%s", sub);
				return true;
			}
		}
		if (json_is_false(extra) && !json_object_get(props, key) &&
			!json_object_get(schema, "patternProperties")) {
			size_t used, n = 0;
			const char *known;
			const json_t *unused;
			snprintf(c->keypath, sizeof(c->keypath), "%s", sub);
			used = (size_t)snprintf(c->text, sizeof(c->text), "unknown key; expected one of: ");
			json_object_foreach((json_t *)props, known, unused) {
				if (used < sizeof(c->text))
					used += (size_t)snprintf(c->text + used, sizeof(c->text) - used,
						"%s%s", n++ ? ", " : "", known);
			}
			return true;
		}
	}
	return false;
}

static bool explain_object(explain_ctx *c, const json_t *schema, const json_t *v, const char *path)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *extra = json_object_get(schema, "additionalProperties");
	const json_t *req = json_object_get(schema, "required");
	const json_t *minp = json_object_get(schema, "minProperties");
	const char *key;
	const json_t *child;
	size_t i;
	char sub[MB_ERROR_WHERE_MAX];

	json_array_foreach(req, i, child) {
		if (json_is_string(child) && !json_object_get(v, json_string_value(child))) {
			snprintf(c->keypath, sizeof(c->keypath), "%s", path);
			snprintf(c->text, sizeof(c->text), "missing required key \"%s\"",
				json_string_value(child));
			return true;
		}
	}
	if (explain_object_keys(c, schema, v, path))
		return true;
	if (json_is_integer(minp) && (json_int_t)json_object_size(v) < json_integer_value(minp)) {
		snprintf(c->keypath, sizeof(c->keypath), "%s", path);
		snprintf(c->text, sizeof(c->text), "expected at least %" JSON_INTEGER_FORMAT
			" key%s, got %s", json_integer_value(minp), json_integer_value(minp) == 1 ? "" : "s",
			json_object_size(v) ? "fewer" : "an empty table");
		return true;
	}
	json_object_foreach((json_t *)v, key, child) {
		const json_t *sch = json_object_get(props, key);
		if (!sch && json_is_object(extra))
			sch = extra;
		mb_keypath_key(sub, sizeof(sub), path, key);
		if (sch && explain(c, sch, child, sub))
			return true;
	}
	return false;
}

static bool explain_array(explain_ctx *c, const json_t *schema, const json_t *v, const char *path)
{
	const json_t *mini = json_object_get(schema, "minItems");
	const json_t *items = json_object_get(schema, "items");
	const json_t *item;
	size_t i;
	char sub[MB_ERROR_WHERE_MAX];

	if (json_is_integer(mini) && (json_int_t)json_array_size(v) < json_integer_value(mini)) {
		snprintf(c->keypath, sizeof(c->keypath), "%s", path);
		snprintf(c->text, sizeof(c->text), "expected at least %" JSON_INTEGER_FORMAT
			" item%s, got %zu", json_integer_value(mini), json_integer_value(mini) == 1 ? "" : "s",
			json_array_size(v));
		return true;
	}
	if (json_is_true(json_object_get(schema, "uniqueItems"))) {
		for (i = 1; i < json_array_size(v); i++) {
			for (size_t j = 0; j < i; j++) {
				if (json_equal(json_array_get(v, i), json_array_get(v, j))) {
					char what[256];
					describe_value(what, sizeof(what), json_array_get(v, i));
					mb_keypath_index(c->keypath, sizeof(c->keypath), path, i);
					snprintf(c->text, sizeof(c->text),
						"duplicate value %s (already given at [%zu])", what, j);
					return true;
				}
			}
		}
	}
	if (!json_is_object(items))
		return false;
	json_array_foreach(v, i, item) {
		mb_keypath_index(sub, sizeof(sub), path, i);
		if (explain(c, items, item, sub))
			return true;
	}
	return false;
}

/* Find the first thing in `v` (depth first, file order) that breaks `schema`,
 * among the keywords we can phrase. false: nothing we can put in words. */
static bool explain(explain_ctx *c, const json_t *schema, const json_t *v, const char *path)
{
	const json_t *alts, *en, *pattern;

	schema = resolve_ref(c->root, schema);
	if (!json_is_object(schema))
		return false;
	alts = json_object_get(schema, "oneOf");
	if (!json_is_array(alts))
		alts = json_object_get(schema, "anyOf");
	if (json_is_array(alts))
		return explain_alternatives(c, alts, v, path);
	en = json_object_get(schema, "enum");
	if (json_is_array(en)) {
		size_t i;
		const json_t *e;
		json_array_foreach(en, i, e) {
			if (json_equal(e, (json_t *)v))
				return false;
		}
		return fail_expected(c, schema, v, path);
	}
	if (!type_matches(schema, v))
		return fail_expected(c, schema, v, path);
	if (json_is_number(v) && !number_in_bounds(schema, v))
		return fail_expected(c, schema, v, path);
	pattern = json_object_get(schema, "pattern");
	if (json_is_string(v) && json_is_string(pattern) &&
		pattern_matches(json_string_value(pattern), json_string_value(v)) == 0)
		return fail_expected(c, schema, v, path);
	if (json_is_object(v))
		return explain_object(c, schema, v, path);
	if (json_is_array(v))
		return explain_array(c, schema, v, path);
	return false;
}

static int validate(const mb_suite *suite, mb_error *err)
{
	const json_t *schema = mb_schema_builtin("suite", err);
	mb_schema_report report;
	explain_ctx ctx;
	char where[MB_ERROR_WHERE_MAX];
	char keypath[MB_ERROR_WHERE_MAX];
	int rc;

	if (!schema)
		return err ? err->code : MB_EINVAL;
	memset(&report, 0, sizeof(report));
	rc = mb_schema_validate(schema, suite->doc, &report, err);
	if (rc != 0 && rc != MB_ESCHEMA)
		return rc;
	/* Explained even when the validator passes it: explain is stricter
	 * about integers (see type_name_matches). */
	ctx.root = schema;
	if (explain(&ctx, schema, suite->doc, "")) {
		mb_suite_where(where, sizeof(where), suite->path, ctx.keypath);
		return mb_error_set(err, MB_ESCHEMA, where, "%s", ctx.text);
	}
	if (rc == 0)
		return 0;
	if (report.count == 0)
		return mb_error_set(err, MB_ESCHEMA, suite->path, "does not match the suite schema");
	pointer_to_keypath(keypath, sizeof(keypath), suite->doc, report.items[0].pointer);
	mb_suite_where(where, sizeof(where), suite->path, keypath);
	return mb_error_set(err, MB_ESCHEMA, where, "%s", report.items[0].message);
}

/* --- what a schema cannot check ----------------------------------------- */

static void axis_list(char *out, size_t len, const mb_row *row)
{
	size_t used = 0;

	out[0] = '\0';
	for (int a = 0; a < row->n_axes && used < len; a++)
		used += (size_t)snprintf(out + used, len - used, "%s%s", a ? ", " : "", row->axes[a]);
}

static void variant_list(char *out, size_t len, const mb_row *row)
{
	size_t used = 0;

	out[0] = '\0';
	for (int v = 0; v < row->n_variants && used < len; v++)
		used += (size_t)snprintf(out + used, len - used, "%s%s", v ? ", " : "",
			row->variants[v].name);
}

static int check_row_variants(const mb_suite *suite, const mb_row *row, const json_t *list,
	const char *rowpath, mb_error *err)
{
	size_t i;
	const json_t *v;
	char path[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX], known[256];

	json_array_foreach(list, i, v) {
		if (mb_row_find_variant(row, json_string_value(v)))
			continue;
		mb_keypath_key(path, sizeof(path), rowpath, "variants");
		mb_keypath_index(path, sizeof(path), path, i);
		mb_suite_where(where, sizeof(where), suite->path, path);
		variant_list(known, sizeof(known), row);
		return mb_error_set(err, MB_ENOTFOUND, where, "unknown variant \"%s\" of row %s; known variants: %s",
			json_string_value(v), row->name, known);
	}
	return 0;
}

static int check_family_axes(const mb_suite *suite, const mb_row *row, const json_t *axes,
	const char *fampath, mb_error *err)
{
	const char *key;
	const json_t *value;
	char path[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX], known[256];

	axis_list(known, sizeof(known), row);
	mb_keypath_key(path, sizeof(path), fampath, "axes");
	json_object_foreach((json_t *)axes, key, value) {
		if (mb_row_axis_index(row, key) >= 0)
			continue;
		mb_keypath_key(path, sizeof(path), path, key);
		mb_suite_where(where, sizeof(where), suite->path, path);
		return mb_error_set(err, MB_EINVAL, where, "unknown axis \"%s\"; %s takes axes %s",
			key, row->name, known);
	}
	for (int a = 0; a < row->n_axes; a++) {
		if (json_object_get(axes, row->axes[a]))
			continue;
		mb_suite_where(where, sizeof(where), suite->path, path);
		return mb_error_set(err, MB_EINVAL, where, "missing axis \"%s\"; %s takes axes %s",
			row->axes[a], row->name, known);
	}
	return 0;
}

void mb_shape_format(char *out, size_t len, const mb_row *row, const int64_t *axis)
{
	size_t used = 0;

	out[0] = '\0';
	for (int a = 0; a < row->n_axes && used < len; a++)
		used += (size_t)snprintf(out + used, len - used, "%s%s=%lld", a ? "," : "",
			row->axes[a], (long long)axis[a]);
}

int mb_family_shapes_init(mb_shape_iter *it, const mb_row *row, const json_t *axes)
{
	const char *key;
	const json_t *value;
	uint64_t total = 1;

	memset(it, 0, sizeof(*it));
	it->row = row;
	json_object_foreach((json_t *)axes, key, value) {
		int a = mb_row_axis_index(row, key);
		if (a < 0 || it->n_axes >= MB_MAX_AXES)
			return MB_EINVAL;
		it->order[it->n_axes] = a;
		it->values[it->n_axes] = value;
		it->count[it->n_axes] = json_is_array(value) ? json_array_size(value) : 1;
		total *= it->count[it->n_axes];
		if (total > SUITE_MAX_SHAPES_PER_FAMILY)
			return MB_EINVAL;
		it->n_axes++;
	}
	it->total = total;
	return 0;
}

bool mb_family_shapes_next(mb_shape_iter *it, int64_t *axis)
{
	if (it->started) {
		/* Odometer: the last axis turns fastest. */
		int k = it->n_axes - 1;
		while (k >= 0 && ++it->pos[k] == it->count[k])
			it->pos[k--] = 0;
		if (k < 0)
			return false;
	}
	it->started = true;
	for (int k = 0; k < it->n_axes; k++) {
		const json_t *v = it->values[k];
		if (json_is_array(v))
			v = json_array_get(v, it->pos[k]);
		axis[it->order[k]] = (int64_t)json_integer_value(v);
	}
	return true;
}

static bool product_overflows(const mb_row *row, const int64_t *axis)
{
	int64_t p = 1;

	for (int a = 0; a < row->n_axes; a++) {
		if (__builtin_mul_overflow(p, axis[a], &p))
			return true;
	}
	return false;
}

static int check_family_shapes(const mb_suite *suite, const mb_row *row, const json_t *axes,
	const char *fampath, mb_error *err)
{
	mb_shape_iter it;
	int64_t axis[MB_MAX_AXES] = {0};
	uint64_t elems, bytes;
	char path[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX], shape[256], why[256];

	mb_keypath_key(path, sizeof(path), fampath, "axes");
	mb_suite_where(where, sizeof(where), suite->path, path);
	if (mb_family_shapes_init(&it, row, axes))
		return mb_error_set(err, MB_EINVAL, where, "the axis lists expand into more than %d shapes",
			SUITE_MAX_SHAPES_PER_FAMILY);
	while (mb_family_shapes_next(&it, axis)) {
		mb_shape_format(shape, sizeof(shape), row, axis);
		/* Before the row's own code multiplies anything: its products
		 * must not overflow, and every one is bounded by this one. */
		if (product_overflows(row, axis) ||
			mb_row_footprint(row, axis, MB_FP32, &elems, &bytes) < 0)
			return mb_error_set(err, MB_EINVAL, where, "shape %s overflows 64-bit element counts",
				shape);
		why[0] = '\0';
		if (row->check_shape && row->check_shape(axis, why, sizeof(why)) < 0)
			return mb_error_set(err, MB_EINVAL, where, "shape %s: %s", shape,
				why[0] ? why : "not a valid shape for this row");
	}
	return 0;
}

static int check_families(const mb_suite *suite, const mb_row *row, const json_t *families,
	const char *rowpath, mb_error *err)
{
	size_t i, j;
	const json_t *fam;
	char fampath[MB_ERROR_WHERE_MAX], path[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX];
	int rc = 0;

	json_array_foreach(families, i, fam) {
		const char *name = json_string_value(json_object_get(fam, "name"));
		mb_keypath_key(fampath, sizeof(fampath), rowpath, "families");
		mb_keypath_index(fampath, sizeof(fampath), fampath, i);
		mb_keypath_key(path, sizeof(path), fampath, "name");
		mb_suite_where(where, sizeof(where), suite->path, path);
		if (strlen(name) >= sizeof(((mb_case_plan *)0)->family))
			return mb_error_set(err, MB_EINVAL, where, "family name is longer than %zu characters",
				sizeof(((mb_case_plan *)0)->family) - 1);
		for (j = 0; j < i; j++) {
			const json_t *other = json_object_get(json_array_get(families, j), "name");
			if (strcmp(json_string_value(other), name) == 0)
				return mb_error_set(err, MB_EINVAL, where,
					"duplicate family name \"%s\" (already used by families[%zu])", name, j);
		}
		rc = check_family_axes(suite, row, json_object_get(fam, "axes"), fampath, err);
		if (!rc)
			rc = check_family_shapes(suite, row, json_object_get(fam, "axes"), fampath, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_rows(const mb_suite *suite, mb_error *err)
{
	const json_t *rows = json_object_get(suite->doc, "rows");
	const char *name;
	const json_t *rowv;
	char rowpath[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX], known[512];
	int rc = 0;

	json_object_foreach((json_t *)rows, name, rowv) {
		const mb_row *row = mb_catalog_find(name);
		mb_keypath_key(rowpath, sizeof(rowpath), "rows", name);
		if (!row) {
			mb_suite_where(where, sizeof(where), suite->path, rowpath);
			mb_catalog_names(known, sizeof(known));
			return mb_error_set(err, MB_ENOTFOUND, where, "unknown row \"%s\"; known rows: %s",
				name, known);
		}
		rc = check_row_variants(suite, row, json_object_get(rowv, "variants"), rowpath, err);
		if (!rc)
			rc = check_families(suite, row, json_object_get(rowv, "families"), rowpath, err);
		if (rc)
			return rc;
	}
	return 0;
}

bool mb_variant_name_known(const char *name)
{
	size_t n_rows;
	const mb_row *const *rows = mb_catalog_rows(&n_rows);

	for (size_t r = 0; r < n_rows; r++) {
		if (mb_row_find_variant(rows[r], name))
			return true;
	}
	return false;
}

/* Whether `name` already appeared in rows before `row_index` or earlier in
 * that row: the list names each variant once. */
static bool variant_seen_before(const mb_row *const *rows, size_t row_index, int variant_index)
{
	const char *name = rows[row_index]->variants[variant_index].name;

	for (size_t r = 0; r <= row_index; r++) {
		int end = r == row_index ? variant_index : rows[r]->n_variants;
		for (int v = 0; v < end; v++) {
			if (strcmp(rows[r]->variants[v].name, name) == 0)
				return true;
		}
	}
	return false;
}

void mb_known_variants(char *out, size_t len)
{
	size_t n_rows, used = 0;
	const mb_row *const *rows = mb_catalog_rows(&n_rows);

	out[0] = '\0';
	for (size_t r = 0; r < n_rows; r++) {
		for (int v = 0; v < rows[r]->n_variants && used < len; v++) {
			if (variant_seen_before(rows, r, v))
				continue;
			used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "",
				rows[r]->variants[v].name);
		}
	}
}

static int check_filters(const mb_suite *suite, mb_error *err)
{
	const json_t *filters = json_object_get(suite->doc, "filters");
	const json_t *v;
	size_t i;
	char path[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX], known[512];

	json_array_foreach(json_object_get(filters, "rows"), i, v) {
		if (mb_catalog_find(json_string_value(v)))
			continue;
		mb_keypath_index(path, sizeof(path), "filters.rows", i);
		mb_suite_where(where, sizeof(where), suite->path, path);
		mb_catalog_names(known, sizeof(known));
		return mb_error_set(err, MB_ENOTFOUND, where, "unknown row \"%s\"; known rows: %s",
			json_string_value(v), known);
	}
	json_array_foreach(json_object_get(filters, "variants"), i, v) {
		if (mb_variant_name_known(json_string_value(v)))
			continue;
		mb_keypath_index(path, sizeof(path), "filters.variants", i);
		mb_suite_where(where, sizeof(where), suite->path, path);
		mb_known_variants(known, sizeof(known));
		return mb_error_set(err, MB_ENOTFOUND, where, "unknown variant \"%s\"; known variants: %s",
			json_string_value(v), known);
	}
	return 0;
}

/* --- settings ------------------------------------------------------------ */

static double number_or(const json_t *obj, const char *key, double fallback)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_number(v) ? json_number_value(v) : fallback;
}

static int64_t integer_or(const json_t *obj, const char *key, int64_t fallback)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : fallback;
}

static int fill_settings(mb_suite *suite, mb_error *err)
{
	const json_t *timing = json_object_get(suite->doc, "timing");
	const json_t *correctness = json_object_get(suite->doc, "correctness");
	const json_t *modes = json_object_get(timing, "modes");
	mb_settings *s = &suite->settings;
	char where[MB_ERROR_WHERE_MAX];
	const json_t *m;
	size_t i;

	s->seed = (uint64_t)integer_or(json_object_get(suite->doc, "suite"), "seed", MB_DEFAULT_SEED);
	s->n_modes = 0;
	json_array_foreach(modes, i, m) {
		if (s->n_modes < MB_MODE_COUNT &&
			mb_mode_parse(json_string_value(m), &s->modes[s->n_modes]) == 0)
			s->n_modes++;
	}
	if (s->n_modes == 0)
		s->modes[s->n_modes++] = MB_MODE_COLD;
	s->max_noise = number_or(timing, "max_noise", MB_DEFAULT_MAX_NOISE);
	s->min_samples = (int)integer_or(timing, "min_samples", MB_DEFAULT_MIN_SAMPLES);
	s->max_samples = (int)integer_or(timing, "max_samples", MB_DEFAULT_MAX_SAMPLES);
	s->min_time_s = number_or(timing, "min_time_s", MB_DEFAULT_MIN_TIME_S);
	s->timeout_s = number_or(timing, "timeout_s", MB_DEFAULT_TIMEOUT_S);
	s->warmup = (int)integer_or(timing, "warmup", MB_DEFAULT_WARMUP);
	s->max_check_rows = integer_or(correctness, "max_check_rows", MB_DEFAULT_MAX_CHECK_ROWS);
	if (s->min_samples > s->max_samples) {
		mb_suite_where(where, sizeof(where), suite->path,
			json_object_get(timing, "min_samples") ? "timing.min_samples" : "timing.max_samples");
		return mb_error_set(err, MB_EINVAL, where,
			"min_samples (%d) is more than max_samples (%d)", s->min_samples, s->max_samples);
	}
	return 0;
}

/* --- loading ------------------------------------------------------------- */

static int read_bytes(char **out, size_t *out_len, const char *path, mb_error *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL, *grown;
	size_t len = 0, cap = 0, n;
	int rc = 0;

	if (!f)
		return mb_error_set(err, MB_EIO, path, "cannot read: %s", strerror(errno));
	do {
		enum { min_chunk = 4096 };
		if (cap - len < min_chunk) {
			cap = cap ? cap * 2 : min_chunk * 4;
			grown = realloc(buf, cap + 1);
			if (!grown) {
				rc = mb_error_set(err, MB_ENOMEM, path, "out of memory reading the file");
				goto cleanup;
			}
			buf = grown;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		rc = mb_error_set(err, MB_EIO, path, "cannot read: %s", strerror(errno ? errno : EIO));
		goto cleanup;
	}
	buf[len] = '\0';
	*out = buf;
	*out_len = len;
	buf = NULL;
cleanup:
	free(buf);
	fclose(f);
	return rc;
}

static int parse_document(mb_suite *suite, const char *text, size_t len, mb_error *err)
{
	int rc;

	if (strlen(text) != len)
		return mb_error_set(err, MB_EINVAL, suite->path,
			"contains a NUL byte at offset %zu; a TOML file is text", strlen(text));
	rc = mb_toml_parse_string(&suite->doc, text, suite->path, err);
	if (!rc)
		rc = validate(suite, err);
	if (!rc)
		rc = check_rows(suite, err);
	if (!rc)
		rc = check_filters(suite, err);
	if (!rc)
		rc = fill_settings(suite, err);
	return rc;
}

int mb_suite_load(mb_suite **out, const char *path, mb_error *err)
{
	mb_suite *suite = NULL;
	char *text = NULL;
	size_t len = 0;
	const json_t *head;
	int rc;

	*out = NULL;
	suite = calloc(1, sizeof(*suite));
	if (!suite || !(suite->path = strdup(path))) {
		rc = mb_error_set(err, MB_ENOMEM, path, "out of memory");
		goto cleanup;
	}
	rc = read_bytes(&text, &len, path, err);
	if (rc)
		goto cleanup;
	rc = mb_blob_id(suite->blob_id, text, len);
	if (rc) {
		mb_error_set(err, rc, path, "cannot compute the file's git blob id");
		goto cleanup;
	}
	rc = parse_document(suite, text, len, err);
	if (rc)
		goto cleanup;
	head = json_object_get(suite->doc, "suite");
	suite->name = strdup(json_string_value(json_object_get(head, "name")));
	suite->description = strdup(json_string_value(json_object_get(head, "description")) ?
		json_string_value(json_object_get(head, "description")) : "");
	if (!suite->name || !suite->description) {
		rc = mb_error_set(err, MB_ENOMEM, path, "out of memory");
		goto cleanup;
	}
	*out = suite;
	suite = NULL;
cleanup:
	free(text);
	mb_suite_free(suite);
	return rc;
}

void mb_suite_free(mb_suite *suite)
{
	if (!suite)
		return;
	free(suite->path);
	free(suite->name);
	free(suite->description);
	json_decref(suite->doc);
	free(suite);
}
