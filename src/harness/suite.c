/* Suite loading: bytes, TOML, schema, then the checks a schema cannot make.
 *
 * When the schema rejects a suite, the validator says where; we then phrase
 * the first problem in file order ourselves (explain_* below), because a
 * message such as "expected a positive integer, got -4" helps an author more
 * than "minimum: -4 < 1", and because oneOf failures otherwise only say that
 * no alternative matched. Anything our phrasing does not recognise falls back
 * to the validator's own words. The validator judges every keyword: the
 * phrasing asks it about one keyword set at a time (holds()) and keeps no
 * reading of its own, but for one rule on top of draft-07: a float where
 * an integer is wanted is refused (float_for_integer).
 */
#include "harness/suite.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/suite_internal.h"
#include "receipts/toml_json.h"
#include "receipts/provenance.h"
#include "receipts/read_file.h"
#include "receipts/schema.h"

/* How deep $ref chains may go before we call the schema cyclic. */
#define REF_DEPTH_MAX 16
/* A family whose axis lists multiply past this is a typo, not a suite. */
#define SUITE_MAX_SHAPES_PER_FAMILY 100000
/* Segments of a --set key path: rows.NAME.families[I].axes.AXIS is six. */
#define SET_MAX_SEGMENTS 16
#define SET_SEGMENT_BYTES 128

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

/* Append a then b to the string in `buf`, cut short at its end. */
static void mb_text_append(char *buf, size_t len, const char *a, const char *b)
{
	const char *parts[2] = {a, b};
	size_t used = strlen(buf);

	for (int i = 0; i < 2; i++) {
		size_t n = strlen(parts[i]);
		if (used + 1 >= len)
			return;
		if (n > len - used - 1)
			n = len - used - 1;
		memcpy(buf + used, parts[i], n);
		used += n;
		buf[used] = '\0';
	}
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
	bool refused; /* the validator refused the document (else every array's items are unique) */
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

/* Whether `v` meets the keywords `keys` of `schema` (those it has), judged
 * by the validator itself on a schema of those keywords alone, so that a
 * suite has one reading of each keyword: explain_* only phrase. A schema
 * the validator cannot use counts as met (the validator's own words then
 * stand). */
static bool holds(const json_t *schema, const json_t *v, const char *const *keys)
{
	json_t *part = json_object();
	int rc = -1;

	for (size_t i = 0; part && keys[i]; i++) {
		json_t *k = json_object_get(schema, keys[i]);
		if (k)
			json_object_set(part, keys[i], k);
	}
	if (part)
		rc = mb_schema_validate(part, v, NULL, NULL);
	json_decref(part);
	return rc != MB_ESCHEMA;
}

/* One rule of our own on top of draft-07, which lets 8.0 pass as an
 * integer: TOML tells floats from integers, and a float where a suite
 * wants an integer (a token count, a seed) is a typo. */
static bool float_for_integer(const json_t *schema, const json_t *v)
{
	const json_t *type = json_object_get(schema, "type");
	size_t i;
	const json_t *t;

	if (!json_is_real(v))
		return false;
	if (json_is_string(type))
		return !strcmp(json_string_value(type), "integer");
	json_array_foreach(type, i, t) {
		if (json_is_string(t) && strcmp(json_string_value(t), "integer"))
			return false;
	}
	return json_is_array(type) && json_array_size(type) > 0;
}

static const char *const type_keys[] = {"type", NULL};
static const char *const value_keys[] = {"enum", "type", "minimum", "exclusiveMinimum", "maximum",
	"exclusiveMaximum", "pattern", NULL};

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
		if (r && json_object_get(r, "type") && holds(r, v, type_keys) && !float_for_integer(r, v))
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

/* Items sorted by value (numbers, then strings; file order among equals). */
typedef struct indexed_item {
	const json_t *v;
	size_t at;
} indexed_item;

static int by_value(const void *pa, const void *pb)
{
	const indexed_item *a = pa, *b = pb;
	bool sa = json_is_string(a->v), sb = json_is_string(b->v);
	int d;

	if (sa != sb)
		return sa ? 1 : -1;
	if (sa) {
		size_t la = json_string_length(a->v), lb = json_string_length(b->v);
		d = memcmp(json_string_value(a->v), json_string_value(b->v), la < lb ? la : lb);
		d = d ? d : (la > lb) - (la < lb);
	} else if (json_is_integer(a->v) != json_is_integer(b->v)) {
		d = json_is_integer(a->v) ? -1 : 1; /* jansson: 1 and 1.0 are not equal */
	} else {
		double x = json_number_value(a->v), y = json_number_value(b->v);
		d = json_is_integer(a->v) ? (json_integer_value(a->v) > json_integer_value(b->v)) -
				(json_integer_value(a->v) < json_integer_value(b->v))
					  : (x > y) - (x < y);
	}
	return d ? d : (a->at > b->at) - (a->at < b->at);
}

/* The first item in file order equal to an earlier one (`*at`, and the
 * earlier one's index in `*first`). Arrays of numbers and strings (every
 * list a suite has) sort in O(n log n); anything else, or no memory, is
 * compared pair by pair. */
static bool first_duplicate(const json_t *v, size_t *at, size_t *first)
{
	size_t n = json_array_size(v), i, j;
	indexed_item *items = malloc((n ? n : 1) * sizeof(*items));
	bool sortable = items != NULL, found = false;

	for (i = 0; sortable && i < n; i++) {
		items[i].v = json_array_get(v, i);
		items[i].at = i;
		sortable = json_is_number(items[i].v) || json_is_string(items[i].v);
	}
	if (sortable) {
		qsort(items, n, sizeof(*items), by_value);
		/* each run of equal values starts with its first in file order,
		 * and the run's second is its first duplicate */
		for (i = 0; i + 1 < n; i = j) {
			for (j = i + 1; j < n && json_equal(items[j].v, items[i].v); j++)
				;
			if (j > i + 1 && (!found || items[i + 1].at < *at)) {
				*at = items[i + 1].at;
				*first = items[i].at;
				found = true;
			}
		}
		free(items);
		return found;
	}
	free(items);
	for (i = 1; i < n; i++)
		for (j = 0; j < i; j++)
			if (json_equal(json_array_get(v, i), json_array_get(v, j))) {
				*at = i;
				*first = j;
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
	if (c->refused && json_is_true(json_object_get(schema, "uniqueItems"))) {
		size_t dup = 0, first = 0;
		if (first_duplicate(v, &dup, &first)) {
			char what[256];
			describe_value(what, sizeof(what), json_array_get(v, dup));
			mb_keypath_index(c->keypath, sizeof(c->keypath), path, dup);
			snprintf(c->text, sizeof(c->text), "duplicate value %s (already given at [%zu])", what, first);
			return true;
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
	const json_t *alts;

	schema = resolve_ref(c->root, schema);
	if (!json_is_object(schema))
		return false;
	alts = json_object_get(schema, "oneOf");
	if (!json_is_array(alts))
		alts = json_object_get(schema, "anyOf");
	if (json_is_array(alts))
		return explain_alternatives(c, alts, v, path);
	if (json_is_array(json_object_get(schema, "enum")))
		return holds(schema, v, value_keys) ? false : fail_expected(c, schema, v, path);
	if (!holds(schema, v, value_keys) || float_for_integer(schema, v))
		return fail_expected(c, schema, v, path);
	if (!holds(schema, v, (const char *const[]){"maxLength", NULL})) {
		snprintf(c->keypath, sizeof(c->keypath), "%s", path);
		snprintf(c->text, sizeof(c->text), "expected at most %" JSON_INTEGER_FORMAT
			" characters, got %zu", json_integer_value(json_object_get(schema, "maxLength")),
			json_string_length(v));
		return true;
	}
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
	ctx.refused = rc == MB_ESCHEMA;
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
	char path[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX], shape[256];
	mb_error why;

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
		mb_error_clear(&why);
		if (row->check_shape && row->check_shape(axis, &why) < 0)
			return mb_error_set(err, MB_EINVAL, where, "shape %s: %s", shape,
				why.text[0] ? why.text : "not a valid shape for this row");
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

/* --- overrides from the command line (--set) ------------------------------ */

/* One segment of a key path: a key, or an index into an array. */
typedef struct set_segment {
	char key[SET_SEGMENT_BYTES];
	size_t index;
	bool is_index;
} set_segment;

typedef struct set_path {
	set_segment seg[SET_MAX_SEGMENTS];
	int n;
} set_path;

/* The keys the set changed, for naming it in later errors. */
typedef struct set_record {
	char keypath[MB_ERROR_WHERE_MAX];
	char label[MB_ERROR_WHERE_MAX];
} set_record;

typedef struct set_log {
	set_record rec[MB_SUITE_MAX_SETS * 4];
	size_t n;
} set_log;

static void set_label(char *out, size_t len, const mb_suite_set *set)
{
	if (set->label)
		snprintf(out, len, "%s", set->label);
	else
		snprintf(out, len, "--set %s", set->text);
}

static bool is_key_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* "rows.rope_qk.families[0].axes.T" into segments. */
static int parse_set_path(set_path *out, const char *key, const char *label, mb_error *err)
{
	const char *p = key;

	memset(out, 0, sizeof(*out));
	while (*p) {
		set_segment *seg = &out->seg[out->n];
		size_t n = 0;

		if (out->n == SET_MAX_SEGMENTS)
			return mb_error_set(err, MB_EINVAL, label, "the key has more than %d parts", SET_MAX_SEGMENTS);
		if (*p == '[') {
			char *end;
			unsigned long long v;
			errno = 0;
			v = strtoull(p + 1, &end, 10);
			if (end == p + 1 || *end != ']' || errno || p[1] == '-')
				return mb_error_set(err, MB_EINVAL, label,
					"expected an index such as [0] at \"%s\"", p);
			seg->index = (size_t)v;
			seg->is_index = true;
			p = end + 1;
		} else {
			while (is_key_char(*p) && n + 1 < sizeof(seg->key))
				seg->key[n++] = *p++;
			seg->key[n] = '\0';
			if (n == 0)
				return mb_error_set(err, MB_EINVAL, label,
					"expected a key of letters, digits, _ or - at \"%s\" (KEY=VALUE, keys joined by "
					"'.', [N] for an array element)", p);
		}
		out->n++;
		if (*p == '.' && p[1] != '\0' && p[1] != '[')
			p++;
		else if (*p != '[' && *p != '\0')
			return mb_error_set(err, MB_EINVAL, label, "unexpected \"%s\" in the key", p);
	}
	if (out->n == 0)
		return mb_error_set(err, MB_EINVAL, label, "empty key (expected KEY=VALUE)");
	return 0;
}

static void set_path_text(char *out, size_t len, const set_path *path, int n)
{
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (path->seg[i].is_index)
			mb_keypath_index(out, len, out, path->seg[i].index);
		else
			mb_keypath_key(out, len, out, path->seg[i].key);
	}
}

/* One bare word of a list: integer, float, boolean, else string. */
static json_t *scalar_value(const char *word)
{
	char *end;
	long long i;
	double d;

	errno = 0;
	i = strtoll(word, &end, 10);
	if (end != word && !*end && !errno)
		return json_integer((json_int_t)i);
	errno = 0;
	d = strtod(word, &end);
	if (end != word && !*end && !errno && isfinite(d))
		return json_real(d);
	if (strcmp(word, "true") == 0 || strcmp(word, "false") == 0)
		return json_boolean(word[0] == 't');
	return json_string(word);
}

/* VALUE as JSON (see mb_suite_set); NULL with err set. */
static json_t *parse_set_value(const char *value, const char *label, mb_error *err)
{
	json_t *out = NULL;

	if (strchr("[{\"'", value[0]) && value[0]) {
		/* a TOML value: parse "v = VALUE" as a document of one key */
		size_t len = strlen(value) + sizeof("v = \n");
		char *text = malloc(len);
		json_t *doc = NULL;
		if (!text) {
			mb_error_set(err, MB_ENOMEM, label, "out of memory");
			return NULL;
		}
		snprintf(text, len, "v = %s\n", value);
		if (mb_toml_parse_string(&doc, text, label, err) == 0)
			out = json_incref(json_object_get(doc, "v"));
		json_decref(doc);
		free(text);
		return out;
	}
	if (!strchr(value, ',')) {
		if (!*value)
			mb_error_set(err, MB_EINVAL, label, "empty value (expected KEY=VALUE)");
		else if (!(out = scalar_value(value)))
			mb_error_set(err, MB_ENOMEM, label, "out of memory");
		return out;
	}
	out = json_array();
	for (const char *p = value; out;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		char word[SET_SEGMENT_BYTES];
		if (n == 0 || n >= sizeof(word)) {
			if (n)
				mb_error_set(err, MB_EINVAL, label, "a list item is longer than %zu characters",
					sizeof(word) - 1);
			else
				mb_error_set(err, MB_EINVAL, label, "empty item in the list \"%s\"", value);
			json_decref(out);
			return NULL;
		}
		memcpy(word, p, n);
		word[n] = '\0';
		if (json_array_append_new(out, scalar_value(word))) {
			mb_error_set(err, MB_ENOMEM, label, "out of memory");
			json_decref(out);
			return NULL;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return out;
}

/* The suite schema's idea of the value at `path` (NULL: anything goes). */
static const json_t *schema_at(const json_t *root, const set_path *path)
{
	const json_t *cur = resolve_ref(root, root);

	for (int i = 0; cur && i < path->n; i++) {
		const json_t *next;
		if (path->seg[i].is_index) {
			next = json_object_get(cur, "items");
		} else {
			next = json_object_get(json_object_get(cur, "properties"), path->seg[i].key);
			if (!next && json_is_object(json_object_get(cur, "additionalProperties")))
				next = json_object_get(cur, "additionalProperties");
		}
		cur = resolve_ref(root, next);
	}
	return cur;
}

static bool schema_wants_array(const json_t *schema)
{
	const char *type = json_string_value(json_object_get(schema, "type"));

	return type && strcmp(type, "array") == 0;
}

static int log_set(set_log *log, const char *keypath, const char *label)
{
	if (log->n < sizeof(log->rec) / sizeof(log->rec[0])) {
		snprintf(log->rec[log->n].keypath, sizeof(log->rec[0].keypath), "%s", keypath);
		snprintf(log->rec[log->n].label, sizeof(log->rec[0].label), "%s", label);
		log->n++;
	}
	return 0;
}

/* Set the value at `path`, making the tables on the way that the file
 * leaves out ([timing] when it has none); arrays must have the element. */
static int set_at(json_t *doc, const set_path *path, json_t *value, const char *suite_path, const char *label,
	mb_error *err)
{
	json_t *cur = doc;
	char where[MB_ERROR_WHERE_MAX], keypath[MB_ERROR_WHERE_MAX];

	for (int i = 0; i < path->n; i++) {
		const set_segment *seg = &path->seg[i];
		bool last = i == path->n - 1;
		json_t *next;

		set_path_text(keypath, sizeof(keypath), path, i + 1);
		mb_suite_where(where, sizeof(where), suite_path, keypath);
		mb_text_append(where, sizeof(where), " (from ", label);
		mb_text_append(where, sizeof(where), ")", "");
		if (seg->is_index) {
			if (!json_is_array(cur))
				return mb_error_set(err, MB_EINVAL, where, "not an array, so [%zu] selects nothing", seg->index);
			if (seg->index >= json_array_size(cur))
				return mb_error_set(err, MB_EINVAL, where, "the array has %zu item%s",
					json_array_size(cur), json_array_size(cur) == 1 ? "" : "s");
			if (last)
				return json_array_set(cur, seg->index, value) ? mb_error_set(err, MB_ENOMEM, where, "out of memory") : 0;
			cur = json_array_get(cur, seg->index);
			continue;
		}
		if (!json_is_object(cur))
			return mb_error_set(err, MB_EINVAL, where, "the value above it is not a table");
		if (last)
			return json_object_set(cur, seg->key, value) ? mb_error_set(err, MB_ENOMEM, where, "out of memory") : 0;
		next = json_object_get(cur, seg->key);
		if (!next) {
			next = json_object();
			if (!next || json_object_set_new(cur, seg->key, next))
				return mb_error_set(err, MB_ENOMEM, where, "out of memory");
		}
		cur = next;
	}
	return 0;
}

/* axes.AXIS and rows.ROW.axes.AXIS: the axis in every family of the rows. */
static int set_axes(mb_suite *suite, const char *only_row, const char *axis, json_t *value, const char *label,
	set_log *log, mb_error *err)
{
	json_t *rows = json_object_get(suite->doc, "rows");
	const char *name;
	json_t *rowv;
	size_t hits = 0;
	char keypath[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX];

	json_object_foreach(rows, name, rowv) {
		const mb_row *row = mb_catalog_find(name);
		json_t *fam;
		size_t i;
		if (only_row && strcmp(only_row, name) != 0)
			continue;
		if (!row || mb_row_axis_index(row, axis) < 0) {
			if (only_row) {
				char known[256] = "";
				for (int a = 0; row && a < row->n_axes; a++)
					mb_text_append(known, sizeof(known), a ? ", " : "", row->axes[a]);
				mb_keypath_key(keypath, sizeof(keypath), "rows", name);
				mb_suite_where(where, sizeof(where), suite->path, keypath);
				mb_text_append(where, sizeof(where), " (from ", label);
				mb_text_append(where, sizeof(where), ")", "");
				return mb_error_set(err, MB_EINVAL, where, "row %s has no axis \"%s\"%s%s",
					name, axis, known[0] ? "; its axes: " : "", known);
			}
			continue;
		}
		json_array_foreach(json_object_get(rowv, "families"), i, fam) {
			json_t *axes = json_object_get(fam, "axes");
			if (!json_is_object(axes))
				continue;
			if (json_object_set(axes, axis, value))
				return mb_error_set(err, MB_ENOMEM, label, "out of memory");
			mb_keypath_key(keypath, sizeof(keypath), "rows", name);
			mb_keypath_key(keypath, sizeof(keypath), keypath, "families");
			mb_keypath_index(keypath, sizeof(keypath), keypath, i);
			mb_keypath_key(keypath, sizeof(keypath), keypath, "axes");
			mb_keypath_key(keypath, sizeof(keypath), keypath, axis);
			log_set(log, keypath, label);
			hits++;
		}
	}
	if (hits)
		return 0;
	if (only_row) {
		mb_keypath_key(keypath, sizeof(keypath), "rows", only_row);
		mb_suite_where(where, sizeof(where), suite->path, keypath);
		mb_text_append(where, sizeof(where), " (from ", label);
		mb_text_append(where, sizeof(where), ")", "");
		return mb_error_set(err, MB_ENOTFOUND, where, "the suite has no row %s", only_row);
	}
	return mb_error_set(err, MB_ENOTFOUND, label, "no row of %s has an axis \"%s\"", suite->path, axis);
}

static int apply_set(mb_suite *suite, const mb_suite_set *set, set_log *log, mb_error *err)
{
	char label[MB_ERROR_WHERE_MAX], keypath[MB_ERROR_WHERE_MAX];
	char key[MB_ERROR_WHERE_MAX];
	const char *eq = strchr(set->text, '=');
	const json_t *schema;
	json_t *value = NULL;
	set_path path;
	int rc;

	set_label(label, sizeof(label), set);
	if (!eq || eq == set->text)
		return mb_error_set(err, MB_EINVAL, label, "expected KEY=VALUE, e.g. timing.modes=hot,graph or axes.T=4096");
	if ((size_t)(eq - set->text) >= sizeof(key))
		return mb_error_set(err, MB_EINVAL, label, "the key is too long");
	snprintf(key, sizeof(key), "%.*s", (int)(eq - set->text), set->text);
	rc = parse_set_path(&path, key, label, err);
	if (rc)
		return rc;
	value = parse_set_value(eq + 1, label, err);
	if (!value)
		return err && err->code ? err->code : MB_EINVAL;
	if (path.n == 2 && !path.seg[0].is_index && !path.seg[1].is_index && strcmp(path.seg[0].key, "axes") == 0) {
		rc = set_axes(suite, NULL, path.seg[1].key, value, label, log, err);
	} else if (path.n == 4 && strcmp(path.seg[0].key, "rows") == 0 && !path.seg[1].is_index &&
		!path.seg[2].is_index && strcmp(path.seg[2].key, "axes") == 0 && !path.seg[3].is_index) {
		rc = set_axes(suite, path.seg[1].key, path.seg[3].key, value, label, log, err);
	} else {
		schema = schema_at(mb_schema_builtin("suite", NULL), &path);
		if (schema_wants_array(schema) && !json_is_array(value)) {
			json_t *one = json_array();
			if (!one || json_array_append_new(one, value)) {
				json_decref(one);
				return mb_error_set(err, MB_ENOMEM, label, "out of memory");
			}
			value = one;
		}
		rc = set_at(suite->doc, &path, value, suite->path, label, err);
		set_path_text(keypath, sizeof(keypath), &path, path.n);
		if (!rc)
			log_set(log, keypath, label);
	}
	json_decref(value);
	return rc;
}

/* Whether key path `a` is `b` or inside it ("timing.modes[0]" in
 * "timing.modes"). */
static bool keypath_within(const char *a, const char *b)
{
	size_t n = strlen(b);

	return n && strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '.' || a[n] == '[');
}

/* An error about a key an override set names the override: "PATH: key
 * (from --set key=value)". */
static void name_override(mb_error *err, const char *suite_path, const set_log *log)
{
	size_t plen = strlen(suite_path);
	const char *keypath;

	if (!err || strncmp(err->where, suite_path, plen) != 0 || strncmp(err->where + plen, ": ", 2) != 0)
		return;
	keypath = err->where + plen + 2;
	for (size_t i = log->n; i-- > 0;) {
		if (keypath_within(keypath, log->rec[i].keypath) || keypath_within(log->rec[i].keypath, keypath)) {
			mb_text_append(err->where, sizeof(err->where), " (from ", log->rec[i].label);
			mb_text_append(err->where, sizeof(err->where), ")", "");
			return;
		}
	}
}

/* --- loading ------------------------------------------------------------- */

static int parse_document(mb_suite *suite, const char *text, size_t len, const mb_suite_set *sets, size_t n_sets,
	mb_error *err)
{
	set_log *log = calloc(1, sizeof(*log));
	int rc = 0;

	if (!log)
		return mb_error_set(err, MB_ENOMEM, suite->path, "out of memory");
	if (strlen(text) != len)
		rc = mb_error_set(err, MB_EINVAL, suite->path,
			"contains a NUL byte at offset %zu; a TOML file is text", strlen(text));
	if (!rc)
		rc = mb_toml_parse_string(&suite->doc, text, suite->path, err);
	if (!rc && n_sets > MB_SUITE_MAX_SETS)
		rc = mb_error_set(err, MB_EINVAL, "--set", "more than %d overrides", MB_SUITE_MAX_SETS);
	for (size_t i = 0; !rc && i < n_sets; i++)
		rc = apply_set(suite, &sets[i], log, err);
	if (!rc)
		rc = validate(suite, err);
	if (!rc)
		rc = check_rows(suite, err);
	if (!rc)
		rc = check_filters(suite, err);
	if (!rc)
		rc = fill_settings(suite, err);
	if (rc && n_sets)
		name_override(err, suite->path, log);
	free(log);
	return rc;
}

int mb_suite_load(mb_suite **out, const char *path, mb_error *err)
{
	return mb_suite_load_with(out, path, NULL, 0, err);
}

int mb_suite_load_with(mb_suite **out, const char *path, const mb_suite_set *sets, size_t n_sets, mb_error *err)
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
	rc = mb_read_file(&text, &len, path, MB_SUITE_MAX_BYTES, "a suite", err);
	if (rc) {
		/* too large, missing or unreadable: all "cannot be read" */
		if (rc != MB_ENOMEM && err)
			err->code = MB_EIO;
		rc = rc == MB_ENOMEM ? rc : MB_EIO;
		goto cleanup;
	}
	rc = mb_blob_id(suite->blob_id, text, len);
	if (rc) {
		mb_error_set(err, rc, path, "cannot compute the file's git blob id");
		goto cleanup;
	}
	rc = parse_document(suite, text, len, sets, n_sets, err);
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
