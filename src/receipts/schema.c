/* JSON Schema draft-07 validation over jansson values (API in schema.h).
 *
 * A validation runs in two steps. A pre-pass walks the schema tree once to
 * index every $id, resolve every $ref and compile every pattern it can reach,
 * so that a broken schema is refused whatever instance it is given. Then the
 * schema and the instance are walked together; each check returns 0 (valid),
 * MB_ESCHEMA (invalid) or another negative code (the schema is unusable).
 *
 * A check writes its issues into a "sink" report. Sub-validations whose
 * failures are not failures of the whole (anyOf branches, not, if, contains)
 * run with a NULL sink, which also lets them stop at the first failure.
 */
#include "receipts/schema.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every nested schema costs a few C stack frames; 256 levels is far deeper
 * than any real document and far shallower than the stack. */
#define SCHEMA_MAX_DEPTH 256
/* Instance pointers are kept whole while walking and cut to
 * MB_SCHEMA_POINTER_MAX only when an issue is stored. */
#define INSTANCE_POINTER_MAX 1024
/* Schema locations only serve error messages; they must leave room in
 * MB_ERROR_WHERE_MAX for "/keyword". A copy is saved on the stack at every
 * $ref, so this stays small. */
#define SCHEMA_LOCATION_MAX 384
/* How much of a value a message quotes before it writes "...". */
#define QUOTE_MAX_BYTES 64
/* Messages that list values (enum, alternatives) stop here. */
#define LIST_MAX_BYTES 160
/* A quotient x / m within this many units in the last place of an integer
 * counts as one: 0.0075 / 0.0001 is 74.99999999999999 in binary floating
 * point. Decimal inputs carry about one ulp of rounding each. */
#define MULTIPLE_OF_MAX_ULPS 2.0
/* The $ref resolution table starts with this many slots (a power of two). */
#define REF_TABLE_MIN_SLOTS 64
/* Room for "%zu" plus its terminator. */
#define INDEX_TEXT_MAX 24

typedef struct text_buf {
	char *data;
	size_t len;
	size_t cap;
	bool failed;
} text_buf;

typedef struct id_entry {
	const json_t *node;
	char *uri; /* absolute (as far as the root's $id allows), no empty "#" */
} id_entry;

typedef struct regex_entry {
	char *pattern;
	regex_t compiled;
} regex_entry;

typedef struct ref_slot {
	const json_t *ref;  /* the "$ref" string node; NULL marks a free slot */
	const char *base;   /* the base URI it was resolved against */
	const json_t *target;
	const char *target_base;
} ref_slot;

typedef struct ref_frame {
	const json_t *target;
	const json_t *instance;
} ref_frame;

typedef struct validator {
	const json_t *root;
	mb_error *err;
	char *root_uri; /* the document's own URI: its $id, or "" */
	const char *base;
	id_entry *ids;
	size_t id_count;
	size_t id_cap;
	regex_entry *regexes;
	size_t regex_count;
	size_t regex_cap;
	ref_slot *refs;
	size_t ref_count;
	size_t ref_slots;
	/* $refs being followed, to catch a loop that never reaches a new value */
	ref_frame active[SCHEMA_MAX_DEPTH];
	size_t active_count;
	size_t depth;
	size_t inst_len;
	char inst[INSTANCE_POINTER_MAX];
	size_t loc_len;
	char loc[SCHEMA_LOCATION_MAX];
} validator;

/* Every keyword the validator reads, in strcmp order of their names (see
 * keyword_table). */
enum {
	KW_ID,
	KW_REF,
	KW_ADDITIONAL_ITEMS,
	KW_ADDITIONAL_PROPERTIES,
	KW_ALL_OF,
	KW_ANY_OF,
	KW_CONST,
	KW_CONTAINS,
	KW_DEPENDENCIES,
	KW_ELSE,
	KW_ENUM,
	KW_EXCLUSIVE_MAXIMUM,
	KW_EXCLUSIVE_MINIMUM,
	KW_IF,
	KW_ITEMS,
	KW_MAX_ITEMS,
	KW_MAX_LENGTH,
	KW_MAX_PROPERTIES,
	KW_MAXIMUM,
	KW_MIN_ITEMS,
	KW_MIN_LENGTH,
	KW_MIN_PROPERTIES,
	KW_MINIMUM,
	KW_MULTIPLE_OF,
	KW_NOT,
	KW_ONE_OF,
	KW_PATTERN,
	KW_PATTERN_PROPERTIES,
	KW_PROPERTIES,
	KW_PROPERTY_NAMES,
	KW_REQUIRED,
	KW_THEN,
	KW_TYPE,
	KW_UNIQUE_ITEMS,
	KW_COUNT
};

/* One schema object's keyword values, by KW_*; NULL where absent. */
typedef struct keywords {
	const json_t *value[KW_COUNT];
} keywords;

typedef int (*keyword_check)(validator *v, const keywords *kw, const json_t *inst,
	mb_schema_report *sink);

static bool is_fatal(int rc)
{
	return rc != 0 && rc != MB_ESCHEMA;
}

/* Fold one check's result into a running one: an unusable schema wins over
 * an invalid instance, which wins over a valid one. */
static int merge(int acc, int rc)
{
	if (is_fatal(acc))
		return acc;
	if (is_fatal(rc))
		return rc;
	return (acc || rc) ? MB_ESCHEMA : 0;
}

/* A silent check stops at the first failure: nobody reads the rest. */
static bool should_stop(int rc, const mb_schema_report *sink)
{
	return is_fatal(rc) || (rc && !sink);
}

/* ---- growing text ------------------------------------------------------ */

static void tb_putn(text_buf *b, const char *s, size_t n)
{
	size_t need, cap;
	char *grown;

	if (b->failed)
		return;
	need = b->len + n + 1;
	if (need > b->cap) {
		cap = b->cap ? b->cap : 64;
		while (cap < need)
			cap *= 2;
		grown = realloc(b->data, cap);
		if (!grown) {
			b->failed = true;
			return;
		}
		b->data = grown;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void tb_puts(text_buf *b, const char *s)
{
	tb_putn(b, s, strlen(s));
}

static void tb_putc(text_buf *b, char ch)
{
	tb_putn(b, &ch, 1);
}

/* The text, now the caller's; NULL when an allocation failed. */
static char *tb_take(text_buf *b)
{
	char *s = b->data;

	if (b->failed) {
		free(s);
		s = NULL;
	} else if (!s) {
		s = calloc(1, 1);
	}
	memset(b, 0, sizeof(*b));
	return s;
}

static int grow(void **items, size_t *cap, size_t count, size_t item_bytes)
{
	size_t want = *cap ? *cap * 2 : 8;
	void *grown;

	if (count < *cap)
		return 0;
	grown = realloc(*items, want * item_bytes);
	if (!grown)
		return MB_ENOMEM;
	*items = grown;
	*cap = want;
	return 0;
}

/* ---- paths and messages ------------------------------------------------ */

/* Append "/segment" with the RFC 6901 escapes and return the old length,
 * which path_pop restores. What does not fit is cut. */
static size_t path_push(char *text, size_t cap, size_t *len, const char *seg, size_t seg_len)
{
	size_t old = *len, at = *len, i;

	if (at + 1 < cap)
		text[at++] = '/';
	for (i = 0; i < seg_len && at + 2 < cap; i++) {
		if (seg[i] == '~' || seg[i] == '/') {
			text[at++] = '~';
			text[at++] = seg[i] == '~' ? '0' : '1';
		} else {
			text[at++] = seg[i];
		}
	}
	text[at] = '\0';
	*len = at;
	return old;
}

static void path_pop(char *text, size_t *len, size_t old)
{
	*len = old;
	text[old] = '\0';
}

static size_t inst_push(validator *v, const char *seg, size_t seg_len)
{
	return path_push(v->inst, sizeof(v->inst), &v->inst_len, seg, seg_len);
}

/* Decimal digits of `index`; snprintf would dominate the time spent on
 * large arrays of numbers. */
static size_t format_index(char out[INDEX_TEXT_MAX], size_t index)
{
	char reversed[INDEX_TEXT_MAX];
	size_t n = 0, i;

	do {
		reversed[n++] = (char)('0' + index % 10);
		index /= 10;
	} while (index);
	for (i = 0; i < n; i++)
		out[i] = reversed[n - 1 - i];
	out[n] = '\0';
	return n;
}

static size_t inst_push_index(validator *v, size_t index)
{
	char text[INDEX_TEXT_MAX];
	size_t n = format_index(text, index);

	return inst_push(v, text, n);
}

static size_t loc_push(validator *v, const char *seg)
{
	return path_push(v->loc, sizeof(v->loc), &v->loc_len, seg, strlen(seg));
}

static size_t loc_push_index(validator *v, size_t index)
{
	char text[INDEX_TEXT_MAX];

	format_index(text, index);
	return loc_push(v, text);
}

/* The schema is unusable: say where in it, and return `code`. */
__attribute__((format(printf, 4, 5)))
static int schema_fail(validator *v, int code, const char *keyword, const char *fmt, ...)
{
	char where[MB_ERROR_WHERE_MAX];
	char text[MB_ERROR_TEXT_MAX];
	va_list ap;

	if (keyword && *keyword)
		snprintf(where, sizeof(where), "schema %s/%s", v->loc, keyword);
	else
		snprintf(where, sizeof(where), "schema %s", v->loc);
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return mb_error_set(v->err, code, where, "%s", text);
}

__attribute__((format(printf, 4, 5)))
static void issue(validator *v, mb_schema_report *sink, const char *keyword, const char *fmt, ...)
{
	mb_schema_issue *it;
	va_list ap;

	if (!sink)
		return;
	sink->total++;
	if (sink->count >= MB_SCHEMA_MAX_ISSUES)
		return;
	it = &sink->items[sink->count++];
	/* deep pointers are cut to the report's field */
	snprintf(it->pointer, sizeof(it->pointer), "%.*s", (int)sizeof(it->pointer) - 1, v->inst);
	snprintf(it->keyword, sizeof(it->keyword), "%s", keyword);
	va_start(ap, fmt);
	vsnprintf(it->message, sizeof(it->message), fmt, ap);
	va_end(ap);
}

/* Cut `s` to fit `size` bytes at a UTF-8 character boundary, ending in "...". */
static void clip(char *out, size_t size, const char *s)
{
	static const char ellipsis[] = "...";
	size_t n = strlen(s);

	if (n < size) {
		memcpy(out, s, n + 1);
		return;
	}
	n = size - sizeof(ellipsis);
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	memcpy(out, s, n);
	memcpy(out + n, ellipsis, sizeof(ellipsis));
}

/* Compact JSON text of `value` for a message, clipped to `size` bytes. */
static void render(char *out, size_t size, const json_t *value)
{
	char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));

	clip(out, size, text ? text : "(value)");
	free(text);
}

static const char *type_name(const json_t *value)
{
	switch (json_typeof(value)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	case JSON_NULL: return "null";
	}
	return "value";
}

/* ---- values ------------------------------------------------------------ */

static long double number_of(const json_t *value)
{
	if (json_is_integer(value))
		return (long double)json_integer_value(value);
	return (long double)json_real_value(value);
}

/* Integers compare exactly; mixed pairs compare in long double, whose 64-bit
 * mantissa holds every json_int_t. */
static int number_cmp(const json_t *a, const json_t *b)
{
	long double x, y;

	if (json_is_integer(a) && json_is_integer(b)) {
		json_int_t i = json_integer_value(a), j = json_integer_value(b);
		return (i > j) - (i < j);
	}
	x = number_of(a);
	y = number_of(b);
	return (x > y) - (x < y);
}

/* Draft-07 counts 1.0 as an integer: only the value matters, not the spelling. */
static bool is_integral(const json_t *value)
{
	double d;

	if (json_is_integer(value))
		return true;
	if (!json_is_real(value))
		return false;
	d = json_real_value(value);
	return isfinite(d) && d == floor(d);
}

static bool values_equal(const json_t *a, const json_t *b);

static bool objects_equal(const json_t *a, const json_t *b)
{
	/* jansson's iterators take non-const objects; they do not modify them */
	json_t *obj = (json_t *)a, *value;
	const char *key;
	size_t key_len;

	if (json_object_size(a) != json_object_size(b))
		return false;
	json_object_keylen_foreach(obj, key, key_len, value) {
		const json_t *other = json_object_getn(b, key, key_len);
		if (!other || !values_equal(value, other))
			return false;
	}
	return true;
}

/* JSON equality as the schema spec defines it: 1 equals 1.0, key order is
 * irrelevant, true is not 1. */
static bool values_equal(const json_t *a, const json_t *b)
{
	size_t i;

	if (json_is_number(a) && json_is_number(b))
		return number_cmp(a, b) == 0;
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_OBJECT:
		return objects_equal(a, b);
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return false;
		for (i = 0; i < json_array_size(a); i++)
			if (!values_equal(json_array_get(a, i), json_array_get(b, i)))
				return false;
		return true;
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
			memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
	default:
		return true; /* true, false, null: the type says it all */
	}
}

static size_t utf8_code_points(const char *s, size_t bytes)
{
	size_t i, n = 0;

	for (i = 0; i < bytes; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			n++;
	return n;
}

/* ---- URIs -------------------------------------------------------------- */

/* RFC 3986: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
static bool has_scheme(const char *s)
{
	size_t i = 0;

	if (!isalpha((unsigned char)s[0]))
		return false;
	while (isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')
		i++;
	return s[i] == ':';
}

/* Length of "scheme://authority" (or "scheme:") at the start of an absolute
 * URI; 0 for a relative one. */
static size_t authority_end(const char *uri)
{
	size_t at;

	if (!has_scheme(uri))
		return 0;
	at = (size_t)(strchr(uri, ':') - uri) + 1;
	if (uri[at] == '/' && uri[at + 1] == '/') {
		at += 2;
		while (uri[at] && !strchr("/?#", uri[at]))
			at++;
	}
	return at;
}

/* RFC 3986 section 5.2.4 over the path `in` (modified), appended to `out`. */
static void put_path_without_dots(text_buf *out, char *in)
{
	size_t start = out->len, seg;
	char *slash;

	while (*in) {
		if (strncmp(in, "../", 3) == 0) {
			in += 3;
		} else if (strncmp(in, "./", 2) == 0 || strncmp(in, "/./", 3) == 0) {
			in += 2; /* "./x" -> "x", "/./x" -> "/x" */
		} else if (strcmp(in, "/.") == 0) {
			in[1] = '\0';
		} else if (strncmp(in, "/../", 4) == 0 || strcmp(in, "/..") == 0) {
			in += 3;
			if (!*in)
				*--in = '/';
			while (out->len > start && out->data[out->len - 1] != '/')
				out->len--;
			if (out->len > start)
				out->len--;
			if (out->data)
				out->data[out->len] = '\0';
		} else if (strcmp(in, ".") == 0 || strcmp(in, "..") == 0) {
			break;
		} else {
			slash = strchr(in + 1, '/');
			seg = slash ? (size_t)(slash - in) : strlen(in);
			tb_putn(out, in, seg);
			in += seg;
		}
	}
}

/* Append `ref` with the dots of its path removed; query and fragment as is. */
static void put_reference(text_buf *out, const char *prefix, size_t prefix_len, const char *ref)
{
	size_t path_len = strcspn(ref, "?#");
	char *path = strndup(ref, path_len);

	tb_putn(out, prefix, prefix_len);
	if (!path) {
		out->failed = true;
		return;
	}
	put_path_without_dots(out, path);
	tb_puts(out, ref + path_len);
	free(path);
}

/* Resolve `ref` against `base` (RFC 3986 section 5.2, enough of it for
 * schema identifiers). Returns a new string without an empty trailing "#",
 * or NULL when out of memory. */
static char *uri_resolve(const char *base, const char *ref)
{
	text_buf out = {0};
	size_t auth = authority_end(base), path_end, cut;
	const char *last_slash;
	char *merged;

	if (has_scheme(ref) || !*base) {
		tb_puts(&out, ref);
	} else if (ref[0] == '#') {
		tb_putn(&out, base, strcspn(base, "#"));
		tb_puts(&out, ref);
	} else if (ref[0] == '?') {
		tb_putn(&out, base, strcspn(base, "?#"));
		tb_puts(&out, ref);
	} else if (ref[0] == '/' && ref[1] == '/') {
		tb_putn(&out, base, auth ? (size_t)(strchr(base, ':') - base) + 1 : 0);
		tb_puts(&out, ref);
	} else if (ref[0] == '/') {
		put_reference(&out, base, auth, ref);
	} else {
		/* merge: the base path up to its last "/", then the reference */
		path_end = auth + strcspn(base + auth, "?#");
		last_slash = base + path_end;
		while (last_slash > base + auth && last_slash[-1] != '/')
			last_slash--;
		cut = (size_t)(last_slash - base);
		merged = malloc(cut - auth + strlen(ref) + 2);
		if (!merged)
			return NULL;
		sprintf(merged, "%s%.*s%s", (auth && cut == auth && base[auth - 1] != ':') ? "/" : "",
			(int)(cut - auth), base + auth, ref);
		put_reference(&out, base, auth, merged);
		free(merged);
	}
	if (!out.failed && out.len && out.data[out.len - 1] == '#')
		out.data[--out.len] = '\0';
	return tb_take(&out);
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* URI fragments may percent-encode their bytes ("#/percent%25field"). */
static char *percent_decode(const char *s)
{
	char *out = malloc(strlen(s) + 1), *at = out;
	int hi, lo;

	if (!out)
		return NULL;
	while (*s) {
		hi = s[0] == '%' ? hex_digit(s[1]) : -1;
		lo = hi >= 0 ? hex_digit(s[2]) : -1;
		if (lo >= 0) {
			*at++ = (char)(hi * 16 + lo);
			s += 3;
		} else {
			*at++ = *s++;
		}
	}
	*at = '\0';
	return out;
}

/* Follow an RFC 6901 pointer from `node`; NULL when it leads nowhere. */
static const json_t *pointer_get(const json_t *node, const char *pointer)
{
	char *seg = malloc(strlen(pointer) + 1), *end;
	const char *at = pointer;
	size_t len, i;
	unsigned long long index;

	while (seg && node && *at == '/') {
		at++;
		for (len = 0; *at && *at != '/'; at++) {
			if (at[0] == '~' && (at[1] == '0' || at[1] == '1')) {
				seg[len++] = at[1] == '0' ? '~' : '/';
				at++;
			} else {
				seg[len++] = *at;
			}
		}
		seg[len] = '\0';
		if (json_is_object(node)) {
			node = json_object_getn(node, seg, len);
		} else if (json_is_array(node)) {
			for (i = 0; i < len && isdigit((unsigned char)seg[i]); i++)
				;
			if (len == 0 || i != len || (len > 1 && seg[0] == '0')) {
				node = NULL;
				break;
			}
			index = strtoull(seg, &end, 10);
			node = json_array_get(node, (size_t)index);
		} else {
			node = NULL;
		}
	}
	if (!seg || *at)
		node = NULL;
	free(seg);
	return node;
}

/* ---- the $id index and $ref resolution --------------------------------- */

static const id_entry *id_by_node(const validator *v, const json_t *node)
{
	size_t i;

	for (i = 0; i < v->id_count; i++)
		if (v->ids[i].node == node)
			return &v->ids[i];
	return NULL;
}

static const id_entry *id_by_uri(const validator *v, const char *uri, size_t len)
{
	size_t i;

	for (i = 0; i < v->id_count; i++)
		if (strlen(v->ids[i].uri) == len && memcmp(v->ids[i].uri, uri, len) == 0)
			return &v->ids[i];
	return NULL;
}

/* In draft-07 a $ref object's other keywords, $id included, are ignored. */
static const char *own_id(const json_t *node)
{
	if (!json_is_object(node) || json_object_get(node, "$ref"))
		return NULL;
	return json_string_value(json_object_get(node, "$id"));
}

/* The base URI inside `node`: its own $id when it has one, else `base`. */
static const char *node_base(const validator *v, const json_t *node, const char *base)
{
	const id_entry *entry;

	if (!own_id(node))
		return base;
	entry = id_by_node(v, node);
	return entry ? entry->uri : base;
}

static size_t ref_hash(const json_t *ref, const char *base, size_t slots)
{
	uintptr_t h = (uintptr_t)ref * 31u + (uintptr_t)base;

	h ^= h >> 17;
	h *= 0x9E3779B1u;
	h ^= h >> 13;
	return (size_t)h & (slots - 1);
}

static ref_slot *ref_lookup(const validator *v, const json_t *ref, const char *base)
{
	size_t i;

	if (!v->ref_slots)
		return NULL;
	i = ref_hash(ref, base, v->ref_slots);
	while (v->refs[i].ref) {
		if (v->refs[i].ref == ref && v->refs[i].base == base)
			return &v->refs[i];
		i = (i + 1) & (v->ref_slots - 1);
	}
	return NULL;
}

static int ref_remember(validator *v, const ref_slot *slot)
{
	ref_slot *old = v->refs, *table;
	size_t old_slots = v->ref_slots, slots, i, j;

	if ((v->ref_count + 1) * 2 > v->ref_slots) {
		slots = old_slots ? old_slots * 2 : REF_TABLE_MIN_SLOTS;
		table = calloc(slots, sizeof(*table));
		if (!table)
			return MB_ENOMEM;
		for (i = 0; i < old_slots; i++) {
			if (!old[i].ref)
				continue;
			j = ref_hash(old[i].ref, old[i].base, slots);
			while (table[j].ref)
				j = (j + 1) & (slots - 1);
			table[j] = old[i];
		}
		free(old);
		v->refs = table;
		v->ref_slots = slots;
	}
	i = ref_hash(slot->ref, slot->base, v->ref_slots);
	while (v->refs[i].ref)
		i = (i + 1) & (v->ref_slots - 1);
	v->refs[i] = *slot;
	v->ref_count++;
	return 0;
}

/* Find the document a URI (without fragment) names: the root, or a schema
 * inside it that declared that URI as its $id. */
static int find_document(const json_t **out, const char **out_base, validator *v,
	const char *uri, size_t len, const char *ref)
{
	const id_entry *entry;

	if (len == 0 || (strlen(v->root_uri) == len && memcmp(v->root_uri, uri, len) == 0)) {
		*out = v->root;
		*out_base = v->root_uri;
		return 0;
	}
	entry = id_by_uri(v, uri, len);
	if (!entry)
		return schema_fail(v, MB_EUNSUPPORTED, "$ref",
			"remote $ref \"%s\" (%.*s) is not supported: only references inside the document are",
			ref, (int)len, uri);
	*out = entry->node;
	*out_base = entry->uri;
	return 0;
}

/* Resolve the "$ref" string node `ref` against `base`, once per pair. */
static int resolve_ref(const json_t **out, const char **out_base, validator *v,
	const json_t *ref, const char *base)
{
	const char *text = json_string_value(ref), *hash;
	const ref_slot *known = ref_lookup(v, ref, base);
	ref_slot slot = { ref, base, NULL, NULL };
	const json_t *doc = NULL;
	char *uri = NULL, *fragment = NULL;
	int rc;

	if (known) {
		*out = known->target;
		*out_base = known->target_base;
		return 0;
	}
	if (!text) {
		rc = schema_fail(v, MB_EINVAL, "$ref", "expected a string, got %s", type_name(ref));
		goto cleanup;
	}
	uri = uri_resolve(base, text);
	if (!uri) {
		rc = schema_fail(v, MB_ENOMEM, "$ref", "out of memory");
		goto cleanup;
	}
	hash = strchr(uri, '#');
	rc = find_document(&doc, &slot.target_base, v, uri, hash ? (size_t)(hash - uri) : strlen(uri), text);
	if (rc)
		goto cleanup;
	fragment = percent_decode(hash ? hash + 1 : "");
	if (!fragment) {
		rc = schema_fail(v, MB_ENOMEM, "$ref", "out of memory");
		goto cleanup;
	}
	if (!*fragment) {
		slot.target = doc;
	} else if (fragment[0] == '/') {
		slot.target = pointer_get(doc, fragment);
	} else {
		/* a plain-name fragment names a schema whose $id is "#name" */
		const id_entry *entry = id_by_uri(v, uri, strlen(uri));
		slot.target = entry ? entry->node : NULL;
	}
	if (!slot.target) {
		rc = schema_fail(v, MB_EINVAL, "$ref", "$ref \"%s\" does not resolve: nothing at \"%s\"", text, uri);
		goto cleanup;
	}
	rc = ref_remember(v, &slot);
	if (rc) {
		rc = schema_fail(v, rc, "$ref", "out of memory");
		goto cleanup;
	}
	*out = slot.target;
	*out_base = slot.target_base;
cleanup:
	free(fragment);
	free(uri);
	return rc;
}

/* ---- ECMA-262 regex to POSIX extended ---------------------------------- */

static const char ere_special[] = ".[]()*+?{}|^$\\";

static void put_literal(text_buf *out, unsigned char ch)
{
	if (ch && strchr(ere_special, ch))
		tb_putc(out, '\\');
	tb_putc(out, (char)ch);
}

static size_t utf8_encode(char out[4], unsigned long cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Read `digits` hex digits at `s`; -1 when they are not there. */
static long read_hex(const char *s, int digits)
{
	long value = 0;
	int i, d;

	for (i = 0; i < digits; i++) {
		d = hex_digit(s[i]);
		if (d < 0)
			return -1;
		value = value * 16 + d;
	}
	return value;
}

/* Decode a \uXXXX (with a following low surrogate) or \xHH escape starting
 * at the letter; returns the code point and sets *used, or -1. */
static long escaped_code_point(const char *at, size_t *used)
{
	long cp, lo;

	if (*at == 'x') {
		*used = 3;
		return read_hex(at + 1, 2);
	}
	cp = read_hex(at + 1, 4);
	*used = 5;
	if (cp >= 0xD800 && cp <= 0xDBFF && at[5] == '\\' && at[6] == 'u') {
		lo = read_hex(at + 7, 4);
		if (lo >= 0xDC00 && lo <= 0xDFFF) {
			*used = 11;
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
		}
	}
	return cp;
}

static int control_escape(char letter)
{
	switch (letter) {
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case 'f': return '\f';
	case 'v': return '\v';
	default: return -1;
	}
}

/* The parts of an ECMA character class, gathered before they are written
 * out in the order POSIX needs. */
typedef struct class_parts {
	text_buf members;
	bool rbracket;
	bool dash;
	bool caret;
} class_parts;

/* An escape inside a class, at the letter after the backslash. */
static int class_escape(class_parts *parts, const char **at, const char **why)
{
	const char *p = *at;
	char bytes[4];
	size_t used;
	long cp;
	int ctl = control_escape(*p);

	if (*p == 'd')
		tb_puts(&parts->members, "0-9");
	else if (*p == 'w')
		tb_puts(&parts->members, "A-Za-z0-9_");
	else if (*p == 's')
		tb_puts(&parts->members, "[:space:]");
	else if (*p == ']')
		parts->rbracket = true;
	else if (*p == '-')
		parts->dash = true;
	else if (*p == '^')
		parts->caret = true;
	else if (*p == 'b')
		tb_putc(&parts->members, '\b'); /* [\b] is a backspace */
	else if (ctl >= 0)
		tb_putc(&parts->members, (char)ctl);
	else if (*p && !isalnum((unsigned char)*p))
		tb_putc(&parts->members, *p);
	else if (*p != 'u' && *p != 'x') {
		*why = "escape not supported inside a character class";
		return MB_EINVAL;
	} else {
		cp = escaped_code_point(p, &used);
		if (cp <= 0) {
			*why = "bad \\u or \\x escape";
			return MB_EINVAL;
		}
		tb_putn(&parts->members, bytes, utf8_encode(bytes, (unsigned long)cp));
		*at = p + used - 1;
	}
	return 0;
}

/* One bracket expression "[...]" starting at `*at`. POSIX has no escapes
 * inside brackets, so "]" goes first, "^" after something and "-" last. */
static int translate_class(text_buf *out, const char **at, const char **why)
{
	const char *p = *at + 1;
	class_parts parts = { { NULL, 0, 0, false }, false, false, false };
	bool negate = *p == '^', lone_caret;
	int rc = 0;

	for (p += negate; *p && *p != ']' && !rc; p++) {
		if (*p == '\\') {
			p++;
			rc = class_escape(&parts, &p, why);
		} else if (*p == '^') {
			parts.caret = true;
		} else {
			tb_putc(&parts.members, *p);
		}
	}
	if (!rc && *p != ']') {
		*why = "unterminated character class";
		rc = MB_EINVAL;
	} else if (!rc && !parts.members.len && !parts.rbracket && !parts.dash && !parts.caret) {
		*why = "empty character class";
		rc = MB_EINVAL;
	}
	if (rc)
		goto cleanup;
	/* "[^]" would read as a negation: a caret with nothing before it goes
	 * after the dash, or alone */
	lone_caret = parts.caret && !parts.rbracket && !parts.members.len;
	if (lone_caret && !parts.dash && !negate) {
		tb_puts(out, "\\^");
		*at = p;
		goto cleanup;
	}
	tb_puts(out, negate ? "[^" : "[");
	if (parts.rbracket)
		tb_putc(out, ']');
	if (parts.members.data)
		tb_puts(out, parts.members.data);
	if (parts.caret && !lone_caret)
		tb_putc(out, '^');
	if (parts.dash)
		tb_putc(out, '-');
	if (lone_caret)
		tb_putc(out, '^');
	tb_putc(out, ']');
	*at = p;
cleanup:
	free(parts.members.data);
	return rc;
}

/* An escape outside brackets, at the letter after the backslash. */
static int translate_escape(text_buf *out, const char **at, const char **why)
{
	static const struct { char letter; const char *posix; } classes[] = {
		{ 'd', "[0-9]" }, { 'D', "[^0-9]" },
		{ 'w', "[A-Za-z0-9_]" }, { 'W', "[^A-Za-z0-9_]" },
		{ 's', "[[:space:]]" }, { 'S', "[^[:space:]]" },
		{ 'b', "\\b" }, { 'B', "\\B" }, /* GNU word boundaries */
	};
	const char *p = *at;
	char bytes[4];
	size_t i, used, n;
	long cp;
	int ctl = control_escape(*p);

	for (i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		if (classes[i].letter == *p) {
			tb_puts(out, classes[i].posix);
			return 0;
		}
	}
	if (ctl >= 0) {
		tb_putc(out, (char)ctl);
	} else if (*p >= '1' && *p <= '9') {
		tb_putc(out, '\\'); /* a back-reference, which GNU ERE knows */
		tb_putc(out, *p);
	} else if (*p == 'u' || *p == 'x') {
		cp = escaped_code_point(p, &used);
		if (cp <= 0) {
			*why = "bad \\u or \\x escape";
			return MB_EINVAL;
		}
		n = utf8_encode(bytes, (unsigned long)cp);
		for (i = 0; i < n; i++)
			put_literal(out, (unsigned char)bytes[i]);
		*at = p + used - 1;
	} else if (*p && !isalnum((unsigned char)*p)) {
		put_literal(out, (unsigned char)*p);
	} else {
		*why = *p ? "escape not supported" : "trailing backslash";
		return MB_EINVAL;
	}
	return 0;
}

/* {n}, {n,} or {n,m} at `p`: its length, or 0 when "{" is a literal. */
static size_t quantifier_length(const char *p)
{
	size_t i = 1;

	if (!isdigit((unsigned char)p[i]))
		return 0;
	while (isdigit((unsigned char)p[i]))
		i++;
	if (p[i] == ',')
		for (i++; isdigit((unsigned char)p[i]); i++)
			;
	return p[i] == '}' ? i + 1 : 0;
}

/* Translate the ECMA-262 subset schemas use into a POSIX extended regex.
 * Laziness (*?, +?) does not change whether a search matches, so it is
 * dropped; lookaround has no POSIX form and is refused. */
static int ecma_to_posix(char **out, const char *pattern, const char **why)
{
	text_buf posix = {0};
	const char *p;
	bool after_quantifier = false;
	size_t qlen;
	int rc = 0;

	for (p = pattern; *p && !rc; p++) {
		bool quantifier = false;
		if (*p == '?' && after_quantifier) {
			after_quantifier = false;
			continue;
		}
		switch (*p) {
		case '\\':
			p++;
			rc = translate_escape(&posix, &p, why);
			break;
		case '[':
			rc = translate_class(&posix, &p, why);
			break;
		case '(':
			if (p[1] == '?' && p[2] != ':') {
				*why = "lookaround and named groups are not supported";
				rc = MB_EINVAL;
			}
			tb_putc(&posix, '(');
			p += p[1] == '?' ? 2 : 0;
			break;
		case '.':
			tb_puts(&posix, "[^\n\r]"); /* ECMA's dot stops at line ends */
			break;
		case '*':
		case '+':
		case '?':
			tb_putc(&posix, *p);
			quantifier = true;
			break;
		case '{':
			qlen = quantifier_length(p);
			if (qlen) {
				tb_putn(&posix, p, qlen);
				p += qlen - 1;
				quantifier = true;
			} else {
				tb_puts(&posix, "\\{");
			}
			break;
		case '}':
			tb_puts(&posix, "\\}");
			break;
		default:
			tb_putc(&posix, *p);
		}
		after_quantifier = quantifier;
	}
	*out = tb_take(&posix);
	if (!rc && !*out)
		rc = MB_ENOMEM;
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* The compiled form of `pattern`, compiled once per validation. */
static int regex_get(const regex_t **out, validator *v, const char *keyword, const char *pattern)
{
	regex_entry *entry;
	char *posix = NULL, reason[MB_SCHEMA_MESSAGE_MAX];
	const char *why = NULL;
	size_t i;
	int rc, status;

	for (i = 0; i < v->regex_count; i++) {
		if (strcmp(v->regexes[i].pattern, pattern) == 0) {
			*out = &v->regexes[i].compiled;
			return 0;
		}
	}
	rc = grow((void **)&v->regexes, &v->regex_cap, v->regex_count, sizeof(*v->regexes));
	if (rc)
		return schema_fail(v, rc, keyword, "out of memory");
	rc = ecma_to_posix(&posix, pattern, &why);
	if (rc) {
		rc = rc == MB_ENOMEM ? schema_fail(v, rc, keyword, "out of memory")
			: schema_fail(v, rc, keyword, "bad regex \"%s\": %s", pattern, why);
		goto cleanup;
	}
	entry = &v->regexes[v->regex_count];
	entry->pattern = strdup(pattern);
	if (!entry->pattern) {
		rc = schema_fail(v, MB_ENOMEM, keyword, "out of memory");
		goto cleanup;
	}
	status = regcomp(&entry->compiled, posix, REG_EXTENDED | REG_NOSUB);
	if (status) {
		regerror(status, &entry->compiled, reason, sizeof(reason));
		free(entry->pattern);
		rc = schema_fail(v, MB_EINVAL, keyword, "bad regex \"%s\": %s", pattern, reason);
		goto cleanup;
	}
	v->regex_count++;
	*out = &entry->compiled;
cleanup:
	free(posix);
	return rc;
}

/* 1 on a match, 0 on none, or a negative code when the pattern is bad. */
static int regex_search(validator *v, const char *keyword, const char *pattern, const char *text)
{
	const regex_t *re = NULL;
	int rc = regex_get(&re, v, keyword, pattern);

	if (rc)
		return rc;
	return regexec(re, text, 0, NULL, 0) == 0;
}

/* ---- the pre-pass ------------------------------------------------------ */

typedef int (*visit_fn)(validator *v, const json_t *node, const char *base);

static const char *const single_schema_keywords[] = {
	"additionalItems", "additionalProperties", "contains", "propertyNames",
	"not", "if", "then", "else",
};
static const char *const schema_map_keywords[] = {
	"properties", "patternProperties", "definitions", "dependencies",
};
static const char *const schema_list_keywords[] = { "allOf", "anyOf", "oneOf" };

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static int walk(validator *v, const json_t *node, const char *base, visit_fn visit);

static int walk_child(validator *v, const json_t *child, const char *base, visit_fn visit,
	const char *keyword, const char *key, size_t index, bool indexed)
{
	size_t old = loc_push(v, keyword);
	int rc;

	if (key)
		loc_push(v, key);
	else if (indexed)
		loc_push_index(v, index);
	rc = walk(v, child, base, visit);
	path_pop(v->loc, &v->loc_len, old);
	return rc;
}

static int walk_children(validator *v, const json_t *node, const char *base, visit_fn visit)
{
	json_t *map, *child;
	const json_t *list;
	const char *key;
	size_t i, j;
	int rc = 0;

	for (i = 0; i < COUNT_OF(single_schema_keywords) && !rc; i++) {
		child = json_object_get(node, single_schema_keywords[i]);
		if (child)
			rc = walk_child(v, child, base, visit, single_schema_keywords[i], NULL, 0, false);
	}
	for (i = 0; i < COUNT_OF(schema_map_keywords) && !rc; i++) {
		map = json_object_get(node, schema_map_keywords[i]);
		if (!json_is_object(map))
			continue;
		json_object_foreach(map, key, child) {
			rc = walk_child(v, child, base, visit, schema_map_keywords[i], key, 0, false);
			if (rc)
				break;
		}
	}
	for (i = 0; i < COUNT_OF(schema_list_keywords) && !rc; i++) {
		list = json_object_get(node, schema_list_keywords[i]);
		for (j = 0; j < json_array_size(list) && !rc; j++)
			rc = walk_child(v, json_array_get(list, j), base, visit, schema_list_keywords[i], NULL, j, true);
	}
	list = json_object_get(node, "items");
	if (!rc && json_is_array(list)) {
		for (j = 0; j < json_array_size(list) && !rc; j++)
			rc = walk_child(v, json_array_get(list, j), base, visit, "items", NULL, j, true);
	} else if (!rc && list) {
		rc = walk_child(v, list, base, visit, "items", NULL, 0, false);
	}
	return rc;
}

static int walk(validator *v, const json_t *node, const char *base, visit_fn visit)
{
	int rc;

	if (!json_is_object(node))
		return 0;
	if (v->depth >= SCHEMA_MAX_DEPTH)
		return schema_fail(v, MB_EINVAL, "", "schemas nest deeper than %d levels", SCHEMA_MAX_DEPTH);
	rc = visit(v, node, base);
	if (rc)
		return rc;
	v->depth++;
	rc = walk_children(v, node, node_base(v, node, base), visit);
	v->depth--;
	return rc;
}

/* Pass 1: record every $id with its absolute URI. */
static int visit_index(validator *v, const json_t *node, const char *base)
{
	const char *id = own_id(node);
	char *uri;
	int rc;

	if (!id)
		return 0;
	rc = grow((void **)&v->ids, &v->id_cap, v->id_count, sizeof(*v->ids));
	uri = rc ? NULL : uri_resolve(base, id);
	if (!uri)
		return schema_fail(v, MB_ENOMEM, "$id", "out of memory");
	v->ids[v->id_count].node = node;
	v->ids[v->id_count].uri = uri;
	v->id_count++;
	return 0;
}

/* Pass 2: resolve every $ref and compile every pattern, so that a broken
 * schema fails whatever instance comes. */
static int visit_prepare(validator *v, const json_t *node, const char *base)
{
	const json_t *ref = json_object_get(node, "$ref"), *target, *pattern, *map;
	const char *target_base, *key;
	const regex_t *re;
	json_t *child;
	int rc = 0;

	if (ref)
		rc = resolve_ref(&target, &target_base, v, ref, base);
	pattern = json_object_get(node, "pattern");
	if (!rc && json_is_string(pattern))
		rc = regex_get(&re, v, "pattern", json_string_value(pattern));
	map = json_object_get(node, "patternProperties");
	if (!rc && json_is_object(map)) {
		/* jansson's iterators take non-const objects; they do not modify them */
		json_object_foreach((json_t *)map, key, child) {
			rc = regex_get(&re, v, "patternProperties", key);
			if (rc)
				break;
		}
	}
	return rc;
}

static int prepare(validator *v)
{
	const char *root_id = own_id(v->root);
	int rc;

	v->root_uri = root_id ? uri_resolve("", root_id) : calloc(1, 1);
	if (!v->root_uri)
		return schema_fail(v, MB_ENOMEM, "", "out of memory");
	/* a root "$id" with a fragment still names the document without it */
	v->root_uri[strcspn(v->root_uri, "#")] = '\0';
	rc = walk(v, v->root, v->root_uri, visit_index);
	if (!rc)
		rc = walk(v, v->root, v->root_uri, visit_prepare);
	return rc;
}

/* ---- validation -------------------------------------------------------- */

static int check(validator *v, const json_t *schema, const json_t *inst, mb_schema_report *sink);

/* Check `inst` against a subschema found at keyword[/key] of the schema. */
static int descend(validator *v, const json_t *sub, const json_t *inst, mb_schema_report *sink,
	const char *keyword, const char *key)
{
	size_t old = loc_push(v, keyword);
	int rc;

	if (key)
		loc_push(v, key);
	rc = check(v, sub, inst, sink);
	path_pop(v->loc, &v->loc_len, old);
	return rc;
}

static int descend_index(validator *v, const json_t *sub, const json_t *inst,
	mb_schema_report *sink, const char *keyword, size_t index)
{
	char text[INDEX_TEXT_MAX];

	format_index(text, index);
	return descend(v, sub, inst, sink, keyword, text);
}

static void report_absorb(mb_schema_report *into, const mb_schema_report *from)
{
	size_t i;

	if (!into)
		return;
	into->total += from->total;
	for (i = 0; i < from->count && into->count < MB_SCHEMA_MAX_ISSUES; i++)
		into->items[into->count++] = from->items[i];
}

/* Read a count keyword (minLength, maxItems, ...): *out stays untouched when
 * the keyword is absent. */
static int read_count(size_t *out, bool *present, validator *v, const json_t *value, const char *keyword)
{
	*present = value != NULL;
	if (!value)
		return 0;
	if (!is_integral(value) || number_of(value) < 0)
		return schema_fail(v, MB_EINVAL, keyword, "expected a non-negative integer, got %s", type_name(value));
	*out = (size_t)number_of(value);
	return 0;
}

static bool type_matches(const char *name, const json_t *inst, bool *known)
{
	static const struct { const char *name; json_type type; } simple[] = {
		{ "null", JSON_NULL }, { "object", JSON_OBJECT }, { "array", JSON_ARRAY },
		{ "string", JSON_STRING },
	};
	size_t i;

	*known = true;
	for (i = 0; i < COUNT_OF(simple); i++)
		if (strcmp(name, simple[i].name) == 0)
			return json_typeof(inst) == simple[i].type;
	if (strcmp(name, "boolean") == 0)
		return json_is_boolean(inst);
	if (strcmp(name, "number") == 0)
		return json_is_number(inst);
	if (strcmp(name, "integer") == 0)
		return is_integral(inst);
	*known = false;
	return false;
}

static int kw_type(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *type = kw->value[KW_TYPE], *one;
	char expected[LIST_MAX_BYTES] = "";
	size_t i, n, used = 0;
	bool match = false, known;

	if (!type)
		return 0;
	n = json_is_array(type) ? json_array_size(type) : 1;
	for (i = 0; i < n; i++) {
		one = json_is_array(type) ? json_array_get(type, i) : type;
		if (!json_is_string(one))
			return schema_fail(v, MB_EINVAL, "type", "expected a type name, got %s", type_name(one));
		match = match || type_matches(json_string_value(one), inst, &known);
		if (!known)
			return schema_fail(v, MB_EINVAL, "type", "unknown type \"%s\"", json_string_value(one));
	}
	if (match)
		return 0;
	for (i = 0; i < n && used < sizeof(expected); i++)
		used += (size_t)snprintf(expected + used, sizeof(expected) - used, "%s%s", i ? " or " : "",
			json_string_value(json_is_array(type) ? json_array_get(type, i) : type));
	issue(v, sink, "type", "expected %s, got %s", n ? expected : "no type at all", type_name(inst));
	return MB_ESCHEMA;
}

static int kw_enum(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *values = kw->value[KW_ENUM];
	char value[QUOTE_MAX_BYTES], allowed[LIST_MAX_BYTES];
	size_t i;

	if (!values)
		return 0;
	if (!json_is_array(values))
		return schema_fail(v, MB_EINVAL, "enum", "expected an array, got %s", type_name(values));
	for (i = 0; i < json_array_size(values); i++)
		if (values_equal(inst, json_array_get(values, i)))
			return 0;
	if (sink) {
		render(value, sizeof(value), inst);
		render(allowed, sizeof(allowed), values);
		issue(v, sink, "enum", "value %s is not one of %s", value, allowed);
	}
	return MB_ESCHEMA;
}

static int kw_const(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *expected = kw->value[KW_CONST];
	char want[QUOTE_MAX_BYTES], got[QUOTE_MAX_BYTES];

	if (!expected || values_equal(inst, expected))
		return 0;
	if (sink) {
		render(want, sizeof(want), expected);
		render(got, sizeof(got), inst);
		issue(v, sink, "const", "expected %s, got %s", want, got);
	}
	return MB_ESCHEMA;
}

static int kw_bounds(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	/* a bound fails when the comparison of value and limit gives bad_sign,
	 * or 0 for the exclusive bounds */
	static const struct { unsigned id; const char *keyword; int bad_sign; bool exclusive; const char *says; } bounds[] = {
		{ KW_MINIMUM, "minimum", -1, false, "is less than minimum" },
		{ KW_MAXIMUM, "maximum", 1, false, "is greater than maximum" },
		{ KW_EXCLUSIVE_MINIMUM, "exclusiveMinimum", -1, true, "is not greater than exclusive minimum" },
		{ KW_EXCLUSIVE_MAXIMUM, "exclusiveMaximum", 1, true, "is not less than exclusive maximum" },
	};
	char value[QUOTE_MAX_BYTES], limit_text[QUOTE_MAX_BYTES];
	const json_t *limit;
	size_t i;
	int cmp, rc = 0;

	for (i = 0; i < COUNT_OF(bounds) && !should_stop(rc, sink); i++) {
		limit = kw->value[bounds[i].id];
		if (!limit)
			continue;
		if (!json_is_number(limit))
			return schema_fail(v, MB_EINVAL, bounds[i].keyword, "expected a number, got %s", type_name(limit));
		if (!json_is_number(inst))
			continue;
		cmp = number_cmp(inst, limit);
		if (cmp != bounds[i].bad_sign && !(cmp == 0 && bounds[i].exclusive))
			continue;
		render(value, sizeof(value), inst);
		render(limit_text, sizeof(limit_text), limit);
		issue(v, sink, bounds[i].keyword, "value %s %s %s", value, bounds[i].says, limit_text);
		rc = MB_ESCHEMA;
	}
	return rc;
}

/* Whether x is an integer multiple of m > 0 up to the rounding that decimal
 * input carries. */
static bool is_multiple(double x, double m)
{
	double q = x / m, r, ulp;

	if (!isfinite(q))
		return fmod(x, m) == 0.0;
	r = nearbyint(q);
	ulp = nextafter(fabs(q), INFINITY) - fabs(q);
	return fabs(q - r) <= MULTIPLE_OF_MAX_ULPS * ulp;
}

static int kw_multiple_of(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *m = kw->value[KW_MULTIPLE_OF];
	char value[QUOTE_MAX_BYTES], step[QUOTE_MAX_BYTES];
	bool ok;

	if (!m)
		return 0;
	if (!json_is_number(m) || number_of(m) <= 0)
		return schema_fail(v, MB_EINVAL, "multipleOf", "expected a number greater than 0");
	if (!json_is_number(inst))
		return 0;
	if (json_is_integer(inst) && json_is_integer(m))
		ok = json_integer_value(inst) % json_integer_value(m) == 0;
	else
		ok = is_multiple((double)number_of(inst), (double)number_of(m));
	if (ok)
		return 0;
	render(value, sizeof(value), inst);
	render(step, sizeof(step), m);
	issue(v, sink, "multipleOf", "value %s is not a multiple of %s", value, step);
	return MB_ESCHEMA;
}

static int kw_string(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *pattern = kw->value[KW_PATTERN];
	size_t min_len = 0, max_len = 0, chars;
	bool has_min = false, has_max = false;
	char value[QUOTE_MAX_BYTES], pat[QUOTE_MAX_BYTES];
	int rc, found;

	rc = read_count(&min_len, &has_min, v, kw->value[KW_MIN_LENGTH], "minLength");
	if (!rc)
		rc = read_count(&max_len, &has_max, v, kw->value[KW_MAX_LENGTH], "maxLength");
	if (!rc && pattern && !json_is_string(pattern))
		rc = schema_fail(v, MB_EINVAL, "pattern", "expected a string, got %s", type_name(pattern));
	if (rc || !json_is_string(inst))
		return rc;
	chars = utf8_code_points(json_string_value(inst), json_string_length(inst));
	if (has_min && chars < min_len) {
		issue(v, sink, "minLength", "string has %zu characters, fewer than minLength %zu", chars, min_len);
		rc = MB_ESCHEMA;
	}
	if (has_max && chars > max_len) {
		issue(v, sink, "maxLength", "string has %zu characters, more than maxLength %zu", chars, max_len);
		rc = MB_ESCHEMA;
	}
	if (!pattern || should_stop(rc, sink))
		return rc;
	found = regex_search(v, "pattern", json_string_value(pattern), json_string_value(inst));
	if (found < 0)
		return found;
	if (!found) {
		render(value, sizeof(value), inst);
		render(pat, sizeof(pat), pattern);
		issue(v, sink, "pattern", "string %s does not match pattern %s", value, pat);
		rc = MB_ESCHEMA;
	}
	return rc;
}

/* items (one schema for all, or a tuple) and additionalItems. */
static int kw_items(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *items = kw->value[KW_ITEMS];
	const json_t *extra = kw->value[KW_ADDITIONAL_ITEMS];
	size_t i, n = json_array_size(inst), tuple, old;
	int rc = 0;

	if (!items || !json_is_array(inst))
		return 0;
	tuple = json_is_array(items) ? json_array_size(items) : n;
	for (i = 0; i < n && !should_stop(rc, sink); i++) {
		old = inst_push_index(v, i);
		if (i < tuple && json_is_array(items))
			rc = merge(rc, descend_index(v, json_array_get(items, i), json_array_get(inst, i), sink, "items", i));
		else if (i < tuple)
			rc = merge(rc, descend(v, items, json_array_get(inst, i), sink, "items", NULL));
		else if (json_is_false(extra)) {
			issue(v, sink, "additionalItems", "item %zu is not allowed: the tuple has %zu items", i, tuple);
			rc = merge(rc, MB_ESCHEMA);
		} else if (extra)
			rc = merge(rc, descend(v, extra, json_array_get(inst, i), sink, "additionalItems", NULL));
		path_pop(v->inst, &v->inst_len, old);
	}
	return rc;
}

static int kw_contains(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *contains = kw->value[KW_CONTAINS];
	size_t i, old;
	int rc;

	if (!contains || !json_is_array(inst))
		return 0;
	for (i = 0; i < json_array_size(inst); i++) {
		old = inst_push_index(v, i);
		rc = descend(v, contains, json_array_get(inst, i), NULL, "contains", NULL);
		path_pop(v->inst, &v->inst_len, old);
		if (rc != MB_ESCHEMA)
			return rc; /* a match, or a broken schema */
	}
	issue(v, sink, "contains", "none of the %zu items matches the \"contains\" schema", json_array_size(inst));
	return MB_ESCHEMA;
}

static int kw_array_size(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *unique = kw->value[KW_UNIQUE_ITEMS];
	size_t min_items = 0, max_items = 0, n = json_array_size(inst), i, j;
	bool has_min = false, has_max = false;
	int rc;

	rc = read_count(&min_items, &has_min, v, kw->value[KW_MIN_ITEMS], "minItems");
	if (!rc)
		rc = read_count(&max_items, &has_max, v, kw->value[KW_MAX_ITEMS], "maxItems");
	if (!rc && unique && !json_is_boolean(unique))
		rc = schema_fail(v, MB_EINVAL, "uniqueItems", "expected a boolean, got %s", type_name(unique));
	if (rc || !json_is_array(inst))
		return rc;
	if (has_min && n < min_items) {
		issue(v, sink, "minItems", "array has %zu items, fewer than minItems %zu", n, min_items);
		rc = MB_ESCHEMA;
	}
	if (has_max && n > max_items) {
		issue(v, sink, "maxItems", "array has %zu items, more than maxItems %zu", n, max_items);
		rc = MB_ESCHEMA;
	}
	for (i = 0; json_is_true(unique) && i < n && !should_stop(rc, sink); i++) {
		for (j = i + 1; j < n; j++) {
			if (values_equal(json_array_get(inst, i), json_array_get(inst, j))) {
				issue(v, sink, "uniqueItems", "items %zu and %zu are equal", i, j);
				rc = MB_ESCHEMA;
				break;
			}
		}
	}
	return rc;
}

static int expect_object(validator *v, const json_t *value, const char *keyword)
{
	if (value && !json_is_object(value))
		return schema_fail(v, MB_EINVAL, keyword, "expected an object, got %s", type_name(value));
	return 0;
}

/* properties, patternProperties and additionalProperties for one member. */
static int check_member(validator *v, const keywords *kw, const char *key, const json_t *value,
	mb_schema_report *sink)
{
	const json_t *props = kw->value[KW_PROPERTIES];
	const json_t *extra = kw->value[KW_ADDITIONAL_PROPERTIES];
	json_t *pats = (json_t *)kw->value[KW_PATTERN_PROPERTIES], *sub; /* iterated below */
	const char *pattern;
	bool matched = false;
	int rc = 0, found;

	sub = props ? json_object_get(props, key) : NULL;
	if (sub) {
		matched = true;
		rc = descend(v, sub, value, sink, "properties", key);
	}
	if (pats) {
		json_object_foreach(pats, pattern, sub) {
			if (should_stop(rc, sink))
				break;
			found = regex_search(v, "patternProperties", pattern, key);
			if (found < 0)
				return found;
			matched = matched || found;
			if (found)
				rc = merge(rc, descend(v, sub, value, sink, "patternProperties", pattern));
		}
	}
	if (matched || !extra || should_stop(rc, sink))
		return rc;
	if (json_is_false(extra)) {
		issue(v, sink, "additionalProperties", "property \"%s\" is not allowed", key);
		return MB_ESCHEMA;
	}
	return merge(rc, descend(v, extra, value, sink, "additionalProperties", NULL));
}

static int kw_members(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	json_t *obj = (json_t *)inst, *value; /* jansson iterators are not const */
	const char *key;
	size_t key_len, old;
	int rc;

	rc = expect_object(v, kw->value[KW_PROPERTIES], "properties");
	if (!rc)
		rc = expect_object(v, kw->value[KW_PATTERN_PROPERTIES], "patternProperties");
	if (rc || !json_is_object(inst))
		return rc;
	json_object_keylen_foreach(obj, key, key_len, value) {
		old = inst_push(v, key, key_len);
		rc = merge(rc, check_member(v, kw, key, value, sink));
		path_pop(v->inst, &v->inst_len, old);
		if (should_stop(rc, sink))
			break;
	}
	return rc;
}

static int kw_required(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *required = kw->value[KW_REQUIRED], *name;
	size_t i;
	int rc = 0;

	if (!required)
		return 0;
	if (!json_is_array(required))
		return schema_fail(v, MB_EINVAL, "required", "expected an array, got %s", type_name(required));
	for (i = 0; i < json_array_size(required) && !should_stop(rc, sink); i++) {
		name = json_array_get(required, i);
		if (!json_is_string(name))
			return schema_fail(v, MB_EINVAL, "required", "expected property names, got %s", type_name(name));
		if (!json_is_object(inst) || json_object_get(inst, json_string_value(name)))
			continue;
		issue(v, sink, "required", "missing required property \"%s\"", json_string_value(name));
		rc = MB_ESCHEMA;
	}
	return rc;
}

static int kw_property_count(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	size_t min_props = 0, max_props = 0, n = json_object_size(inst);
	bool has_min = false, has_max = false;
	int rc;

	rc = read_count(&min_props, &has_min, v, kw->value[KW_MIN_PROPERTIES], "minProperties");
	if (!rc)
		rc = read_count(&max_props, &has_max, v, kw->value[KW_MAX_PROPERTIES], "maxProperties");
	if (rc || !json_is_object(inst))
		return rc;
	if (has_min && n < min_props) {
		issue(v, sink, "minProperties", "object has %zu properties, fewer than minProperties %zu", n, min_props);
		rc = MB_ESCHEMA;
	}
	if (has_max && n > max_props) {
		issue(v, sink, "maxProperties", "object has %zu properties, more than maxProperties %zu", n, max_props);
		rc = MB_ESCHEMA;
	}
	return rc;
}

/* propertyNames: each name, as a string, against the schema. A failure is
 * reported at the member, with the inner reason. */
static int check_name(validator *v, const json_t *names, const char *key, size_t key_len,
	mb_schema_report *sink)
{
	json_t *name = json_stringn(key, key_len);
	mb_schema_report *inner = NULL;
	size_t old;
	int rc;

	if (!name)
		return schema_fail(v, MB_ENOMEM, "propertyNames", "out of memory");
	old = inst_push(v, key, key_len);
	rc = descend(v, names, name, NULL, "propertyNames", NULL);
	if (rc == MB_ESCHEMA && sink) {
		inner = calloc(1, sizeof(*inner));
		if (!inner) {
			rc = schema_fail(v, MB_ENOMEM, "propertyNames", "out of memory");
			goto cleanup;
		}
		rc = descend(v, names, name, inner, "propertyNames", NULL);
		if (rc == MB_ESCHEMA)
			issue(v, sink, "propertyNames", "property name \"%s\" is not allowed: %s", key,
				inner->count ? inner->items[0].message : "it fails the propertyNames schema");
	}
cleanup:
	path_pop(v->inst, &v->inst_len, old);
	free(inner);
	json_decref(name);
	return rc;
}

static int kw_property_names(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *names = kw->value[KW_PROPERTY_NAMES];
	json_t *obj = (json_t *)inst, *value; /* jansson iterators are not const */
	const char *key;
	size_t key_len;
	int rc = 0;

	if (!names || !json_is_object(inst))
		return 0;
	json_object_keylen_foreach(obj, key, key_len, value) {
		rc = merge(rc, check_name(v, names, key, key_len, sink));
		if (should_stop(rc, sink))
			break;
	}
	return rc;
}

static int kw_dependencies(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	json_t *deps = (json_t *)kw->value[KW_DEPENDENCIES], *dep; /* iterated below */
	const json_t *name;
	const char *key;
	size_t i;
	int rc = expect_object(v, deps, "dependencies");

	if (rc || !deps || !json_is_object(inst))
		return rc;
	json_object_foreach(deps, key, dep) {
		if (should_stop(rc, sink))
			break;
		if (!json_object_get(inst, key))
			continue;
		if (!json_is_array(dep)) {
			rc = merge(rc, descend(v, dep, inst, sink, "dependencies", key));
			continue;
		}
		for (i = 0; i < json_array_size(dep); i++) {
			name = json_array_get(dep, i);
			if (!json_is_string(name))
				return schema_fail(v, MB_EINVAL, "dependencies", "expected property names under \"%s\"", key);
			if (json_object_get(inst, json_string_value(name)))
				continue;
			issue(v, sink, "dependencies", "property \"%s\" is required because \"%s\" is present",
				json_string_value(name), key);
			rc = MB_ESCHEMA;
		}
	}
	return rc;
}

static int expect_schema_list(validator *v, const json_t *list, const char *keyword)
{
	if (!json_is_array(list) || json_array_size(list) == 0)
		return schema_fail(v, MB_EINVAL, keyword, "expected a non-empty array of schemas");
	return 0;
}

static int kw_all_of(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *list = kw->value[KW_ALL_OF];
	size_t i;
	int rc;

	if (!list)
		return 0;
	rc = expect_schema_list(v, list, "allOf");
	if (rc)
		return rc;
	for (i = 0; i < json_array_size(list) && !should_stop(rc, sink); i++)
		rc = merge(rc, descend_index(v, json_array_get(list, i), inst, sink, "allOf", i));
	return rc;
}

/* How telling a failed branch is: issues deeper in the value say more than a
 * type mismatch at the value itself, which every wrong branch shows. */
static size_t branch_score(const validator *v, const mb_schema_report *r)
{
	size_t i, deepest = 0, len;
	bool beyond_type = false;

	for (i = 0; i < r->count; i++) {
		len = strlen(r->items[i].pointer);
		deepest = len > deepest ? len : deepest;
		beyond_type = beyond_type || len > v->inst_len || strcmp(r->items[i].keyword, "type") != 0;
	}
	return deepest * 2 + (beyond_type ? 1 : 0);
}

/* All branches failed: report the most telling one, or, when each only
 * failed on its type here, one line that names what each wanted. */
static int explain_branches(validator *v, const json_t *list, const json_t *inst,
	mb_schema_report *sink, const char *keyword)
{
	mb_schema_report *best = calloc(1, sizeof(*best)), *cur = calloc(1, sizeof(*cur)), *swap;
	char summary[MB_SCHEMA_MESSAGE_MAX] = "";
	size_t i, used = 0, best_score = 0, score;
	int rc = MB_ESCHEMA;

	if (!best || !cur) {
		rc = schema_fail(v, MB_ENOMEM, keyword, "out of memory");
		goto cleanup;
	}
	for (i = 0; i < json_array_size(list); i++) {
		memset(cur, 0, sizeof(*cur));
		rc = descend_index(v, json_array_get(list, i), inst, cur, keyword, i);
		if (is_fatal(rc))
			goto cleanup;
		if (cur->count && used < sizeof(summary))
			used += (size_t)snprintf(summary + used, sizeof(summary) - used, "%s%s",
				used ? "; " : "", cur->items[0].message);
		score = branch_score(v, cur);
		if (i == 0 || score > best_score) {
			best_score = score;
			swap = best;
			best = cur;
			cur = swap;
		}
	}
	rc = MB_ESCHEMA;
	if (best_score > v->inst_len * 2)
		report_absorb(sink, best);
	else
		issue(v, sink, keyword, "no alternative matches: %s", summary);
cleanup:
	free(best);
	free(cur);
	return rc;
}

/* anyOf (at least one branch) and oneOf (exactly one). */
static int check_alternatives(validator *v, const json_t *list, const json_t *inst,
	mb_schema_report *sink, const char *keyword, bool exactly_one)
{
	size_t i, matches = 0, first = 0;
	int rc;

	if (!list)
		return 0;
	rc = expect_schema_list(v, list, keyword);
	if (rc)
		return rc;
	for (i = 0; i < json_array_size(list); i++) {
		rc = descend_index(v, json_array_get(list, i), inst, NULL, keyword, i);
		if (is_fatal(rc))
			return rc;
		if (rc)
			continue;
		if (!exactly_one)
			return 0;
		if (matches++ == 0) {
			first = i;
			continue;
		}
		issue(v, sink, keyword, "value matches alternatives %zu and %zu, expected exactly one", first, i);
		return MB_ESCHEMA;
	}
	if (matches == 1)
		return 0;
	return sink ? explain_branches(v, list, inst, sink, keyword) : MB_ESCHEMA;
}

static int kw_any_of(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	return check_alternatives(v, kw->value[KW_ANY_OF], inst, sink, "anyOf", false);
}

static int kw_one_of(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	return check_alternatives(v, kw->value[KW_ONE_OF], inst, sink, "oneOf", true);
}

static int kw_not(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *not_schema = kw->value[KW_NOT];
	int rc;

	if (!not_schema)
		return 0;
	rc = descend(v, not_schema, inst, NULL, "not", NULL);
	if (rc == MB_ESCHEMA)
		return 0;
	if (rc)
		return rc;
	issue(v, sink, "not", "value must not match the \"not\" schema");
	return MB_ESCHEMA;
}

static int kw_if(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *cond = kw->value[KW_IF];
	const json_t *then_schema = kw->value[KW_THEN];
	const json_t *else_schema = kw->value[KW_ELSE];
	int rc;

	if (!cond)
		return 0;
	rc = descend(v, cond, inst, NULL, "if", NULL);
	if (rc == 0 && then_schema)
		return descend(v, then_schema, inst, sink, "then", NULL);
	if (rc == MB_ESCHEMA && else_schema)
		return descend(v, else_schema, inst, sink, "else", NULL);
	return is_fatal(rc) ? rc : 0;
}

/* The checks, in the order their issues are reported. Some read several
 * keywords (kw_members: properties, patternProperties, additionalProperties). */
static const keyword_check keyword_checks[] = {
	kw_type, kw_enum, kw_const, kw_bounds, kw_multiple_of, kw_string,
	kw_required, kw_members, kw_property_count, kw_property_names, kw_dependencies,
	kw_items, kw_contains, kw_array_size,
	kw_all_of, kw_any_of, kw_one_of, kw_not, kw_if,
};
enum {
	CHECK_TYPE, CHECK_ENUM, CHECK_CONST, CHECK_BOUNDS, CHECK_MULTIPLE_OF, CHECK_STRING,
	CHECK_REQUIRED, CHECK_MEMBERS, CHECK_PROPERTY_COUNT, CHECK_PROPERTY_NAMES, CHECK_DEPENDENCIES,
	CHECK_ITEMS, CHECK_CONTAINS, CHECK_ARRAY_SIZE,
	CHECK_ALL_OF, CHECK_ANY_OF, CHECK_ONE_OF, CHECK_NOT, CHECK_IF,
	NO_CHECK
};

typedef struct keyword_entry {
	const char *name;
	unsigned check; /* index into keyword_checks, or NO_CHECK */
} keyword_entry;

/* Sorted by strcmp for bsearch, and indexed by KW_*. A schema names a
 * handful of keywords, so walking its keys and looking each up here is far
 * cheaper than asking it for every keyword draft-07 knows. */
static const keyword_entry keyword_table[KW_COUNT] = {
	[KW_ID] = { "$id", NO_CHECK },
	[KW_REF] = { "$ref", NO_CHECK },
	[KW_ADDITIONAL_ITEMS] = { "additionalItems", CHECK_ITEMS },
	[KW_ADDITIONAL_PROPERTIES] = { "additionalProperties", CHECK_MEMBERS },
	[KW_ALL_OF] = { "allOf", CHECK_ALL_OF },
	[KW_ANY_OF] = { "anyOf", CHECK_ANY_OF },
	[KW_CONST] = { "const", CHECK_CONST },
	[KW_CONTAINS] = { "contains", CHECK_CONTAINS },
	[KW_DEPENDENCIES] = { "dependencies", CHECK_DEPENDENCIES },
	[KW_ELSE] = { "else", CHECK_IF },
	[KW_ENUM] = { "enum", CHECK_ENUM },
	[KW_EXCLUSIVE_MAXIMUM] = { "exclusiveMaximum", CHECK_BOUNDS },
	[KW_EXCLUSIVE_MINIMUM] = { "exclusiveMinimum", CHECK_BOUNDS },
	[KW_IF] = { "if", CHECK_IF },
	[KW_ITEMS] = { "items", CHECK_ITEMS },
	[KW_MAX_ITEMS] = { "maxItems", CHECK_ARRAY_SIZE },
	[KW_MAX_LENGTH] = { "maxLength", CHECK_STRING },
	[KW_MAX_PROPERTIES] = { "maxProperties", CHECK_PROPERTY_COUNT },
	[KW_MAXIMUM] = { "maximum", CHECK_BOUNDS },
	[KW_MIN_ITEMS] = { "minItems", CHECK_ARRAY_SIZE },
	[KW_MIN_LENGTH] = { "minLength", CHECK_STRING },
	[KW_MIN_PROPERTIES] = { "minProperties", CHECK_PROPERTY_COUNT },
	[KW_MINIMUM] = { "minimum", CHECK_BOUNDS },
	[KW_MULTIPLE_OF] = { "multipleOf", CHECK_MULTIPLE_OF },
	[KW_NOT] = { "not", CHECK_NOT },
	[KW_ONE_OF] = { "oneOf", CHECK_ONE_OF },
	[KW_PATTERN] = { "pattern", CHECK_STRING },
	[KW_PATTERN_PROPERTIES] = { "patternProperties", CHECK_MEMBERS },
	[KW_PROPERTIES] = { "properties", CHECK_MEMBERS },
	[KW_PROPERTY_NAMES] = { "propertyNames", CHECK_PROPERTY_NAMES },
	[KW_REQUIRED] = { "required", CHECK_REQUIRED },
	[KW_THEN] = { "then", CHECK_IF },
	[KW_TYPE] = { "type", CHECK_TYPE },
	[KW_UNIQUE_ITEMS] = { "uniqueItems", CHECK_ARRAY_SIZE },
};

static int keyword_cmp(const void *key, const void *entry)
{
	return strcmp(key, ((const keyword_entry *)entry)->name);
}

/* Collect the keyword values of `schema` into `out`; returns the checks
 * they call for, one bit per check. */
static uint32_t scan_keywords(keywords *out, const json_t *schema)
{
	json_t *obj = (json_t *)schema, *value; /* jansson iterators are not const */
	const keyword_entry *entry;
	const char *key;
	uint32_t needed = 0;

	memset(out, 0, sizeof(*out));
	json_object_foreach(obj, key, value) {
		entry = bsearch(key, keyword_table, KW_COUNT, sizeof(keyword_table[0]), keyword_cmp);
		if (!entry)
			continue;
		out->value[entry - keyword_table] = value;
		if (entry->check != NO_CHECK)
			needed |= UINT32_C(1) << entry->check;
	}
	return needed;
}

static int follow_ref(validator *v, const json_t *ref, const json_t *inst, mb_schema_report *sink)
{
	char saved_loc[SCHEMA_LOCATION_MAX];
	size_t saved_len = v->loc_len, i;
	const char *saved_base = v->base, *target_base = NULL;
	const json_t *target = NULL;
	int rc;

	rc = resolve_ref(&target, &target_base, v, ref, v->base);
	if (rc)
		return rc;
	for (i = 0; i < v->active_count; i++)
		if (v->active[i].target == target && v->active[i].instance == inst)
			return schema_fail(v, MB_EINVAL, "$ref",
				"$ref \"%s\" leads back to itself without descending into the value",
				json_string_value(ref));
	v->active[v->active_count].target = target;
	v->active[v->active_count].instance = inst;
	v->active_count++;
	memcpy(saved_loc, v->loc, saved_len + 1);
	/* from here on, locations read as the reference's target */
	v->loc_len = strnlen(json_string_value(ref), sizeof(v->loc) - 1);
	memcpy(v->loc, json_string_value(ref), v->loc_len);
	v->loc[v->loc_len] = '\0';
	v->base = target_base;
	rc = check(v, target, inst, sink);
	v->base = saved_base;
	memcpy(v->loc, saved_loc, saved_len + 1);
	v->loc_len = saved_len;
	v->active_count--;
	return rc;
}

static int check(validator *v, const json_t *schema, const json_t *inst, mb_schema_report *sink)
{
	const char *saved_base = v->base;
	keywords kw;
	uint32_t needed;
	size_t i;
	int rc = 0;

	if (json_is_true(schema))
		return 0;
	if (json_is_false(schema)) {
		issue(v, sink, "false", "no value is allowed here");
		return MB_ESCHEMA;
	}
	if (!json_is_object(schema))
		return schema_fail(v, MB_EINVAL, "", "expected a schema (object or boolean), got %s", type_name(schema));
	if (v->depth >= SCHEMA_MAX_DEPTH)
		return schema_fail(v, MB_EINVAL, "", "schemas nest deeper than %d levels (a $ref cycle?)",
			SCHEMA_MAX_DEPTH);
	v->depth++;
	needed = scan_keywords(&kw, schema);
	if (kw.value[KW_REF]) {
		rc = follow_ref(v, kw.value[KW_REF], inst, sink);
	} else {
		if (kw.value[KW_ID])
			v->base = node_base(v, schema, v->base);
		for (i = 0; i < COUNT_OF(keyword_checks) && !should_stop(rc, sink); i++)
			if (needed & (UINT32_C(1) << i))
				rc = merge(rc, keyword_checks[i](v, &kw, inst, sink));
		v->base = saved_base;
	}
	v->depth--;
	return rc;
}

static void validator_free(validator *v)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < v->id_count; i++)
		free(v->ids[i].uri);
	for (i = 0; i < v->regex_count; i++) {
		regfree(&v->regexes[i].compiled);
		free(v->regexes[i].pattern);
	}
	free(v->ids);
	free(v->regexes);
	free(v->refs);
	free(v->root_uri);
	free(v);
}

/* Without a caller's report, issues still go somewhere, so that `err` can
 * name the first one. */
static void fill_error(mb_error *err, const mb_schema_report *report)
{
	const mb_schema_issue *first = &report->items[0];

	if (!report->count) {
		mb_error_set(err, MB_ESCHEMA, "", "the value does not match its schema");
		return;
	}
	if (report->total > 1)
		mb_error_set(err, MB_ESCHEMA, first->pointer, "%s: %s (and %zu more issues)",
			first->keyword, first->message, report->total - 1);
	else
		mb_error_set(err, MB_ESCHEMA, first->pointer, "%s: %s", first->keyword, first->message);
}

int mb_schema_validate(const json_t *schema, const json_t *instance,
	mb_schema_report *report, mb_error *err)
{
	mb_schema_report *own = NULL, *sink = report;
	validator *v = NULL;
	int rc;

	if (report)
		memset(report, 0, sizeof(*report));
	if (!schema || !instance) {
		rc = mb_error_set(err, MB_EINVAL, "", "mb_schema_validate: schema and instance are required");
		goto cleanup;
	}
	v = calloc(1, sizeof(*v));
	own = report ? NULL : calloc(1, sizeof(*own));
	if (!v || (!report && !own)) {
		rc = mb_error_set(err, MB_ENOMEM, "", "out of memory");
		goto cleanup;
	}
	sink = report ? report : own;
	v->root = schema;
	v->err = err;
	v->loc_len = (size_t)snprintf(v->loc, sizeof(v->loc), "#");
	rc = prepare(v);
	if (rc)
		goto cleanup;
	v->base = node_base(v, schema, v->root_uri);
	rc = check(v, schema, instance, sink);
	if (rc == MB_ESCHEMA)
		fill_error(err, sink);
cleanup:
	validator_free(v);
	free(own);
	return rc;
}

void mb_schema_report_print(const mb_schema_report *report, const char *prefix, void *file)
{
	FILE *out = file;
	size_t i;

	if (!report || !out)
		return;
	for (i = 0; i < report->count; i++)
		fprintf(out, "%s%s: %s: %s\n", prefix ? prefix : "", report->items[i].pointer,
			report->items[i].keyword, report->items[i].message);
	if (report->total > report->count)
		fprintf(out, "%s: %zu more issues not shown\n", prefix ? prefix : "",
			report->total - report->count);
}
