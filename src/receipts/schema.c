/* JSON Schema draft-07 validation over jansson values (API in schema.h).
 *
 * A validation runs in two steps. A pre-pass walks the schema tree once to
 * index every $id, resolve every $ref and compile every pattern it can reach,
 * so that a broken schema is refused whatever instance it is given. Then the
 * schema and the instance are walked together; each check returns 0 (valid),
 * MB_ESCHEMA (invalid) or another negative code (the schema is unusable, or
 * a limit of schema.h was reached).
 *
 * A check writes its issues into a "sink" report. Sub-validations whose
 * failures are not failures of the whole (anyOf branches, not, if, contains)
 * run with a NULL sink, which also lets them stop at the first failure.
 *
 * Nothing here grows faster than its input (schema.h lists the limits):
 * documents are measured before anything recurses into them; the result of
 * a $ref target against one value is remembered, so a chain of anyOf over
 * shared definitions is walked once per level, not once per path; explaining
 * failed alternatives draws on a fixed budget; uniqueItems and large enums
 * compare hashes first; patterns run on a bounded engine over code points
 * (see "patterns" below), never on the C library's regex.
 */
#include "receipts/schema.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "receipts/read_file.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define STRINGIFY_(x) #x
#define MB_SCHEMA_STRINGIFY(x) STRINGIFY_(x)

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
/* Hash tables start with this many slots (a power of two). */
#define HASH_MIN_SLOTS 16
/* Remembered $ref results: beyond this many the validator stops adding
 * (the step budget still bounds the work). */
#define MEMO_MAX_ENTRIES (1u << 20)
/* How many failed anyOf/oneOf it explains branch by branch; after that a
 * failure says "no alternative matches" without descending again. Real
 * documents fail a few; a schema built to multiply explanations stops. */
#define EXPLAIN_BUDGET 256
/* How many times a $ref target already known to fail one value is walked
 * again to report its issues in another place; after that one line says
 * it fails. */
#define REF_REPEAT_BUDGET 256
/* Arrays up to this size are checked for uniqueness pairwise, and enums
 * up to this size are searched in order; larger ones are hashed. */
#define LINEAR_COMPARE_MAX 8
/* The step budgets: a base, plus so much per value (checks) or per byte of
 * text (pattern steps) of the instance. A real document needs a few checks
 * per value and a few pattern steps per byte. */
#define CHECK_STEPS_BASE 4000000u
#define CHECK_STEPS_PER_VALUE 256u
#define MATCH_STEPS_BASE 4000000u
#define MATCH_STEPS_PER_BYTE 256u

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

/* An open-addressing index from 64-bit hashes to item numbers; the
 * caller compares the items themselves. */
typedef struct hash_index {
	uint64_t *hashes;
	size_t *items; /* item + 1; 0 marks a free slot */
	size_t slots;  /* a power of two, or 0 */
	size_t count;
} hash_index;

/* A compiled pattern; the engine is in the "patterns" section. */
typedef struct re_prog re_prog;

typedef struct regex_entry {
	char *pattern;
	size_t len;
	re_prog *prog;
} regex_entry;

/* A $ref target's result for one value, evaluated from one base. */
typedef struct memo_entry {
	const json_t *target;
	const json_t *instance;
	const char *base;
	bool valid;
} memo_entry;

/* Whether a $ref target refers further (only such targets can be reached
 * along many paths at once, so only their results are remembered). */
typedef struct target_kind {
	const json_t *target;
	bool refers;
} target_kind;

/* A large enum's members by hash. */
typedef struct enum_set {
	const json_t *values;
	hash_index members;
} enum_set;

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
	uint64_t seed; /* of every hash: a collision cannot be planned */
	id_entry *ids;
	size_t id_count;
	size_t id_cap;
	hash_index ids_by_node;
	hash_index ids_by_uri;
	regex_entry *regexes;
	size_t regex_count;
	size_t regex_cap;
	hash_index regex_index;
	memo_entry *memo;
	size_t memo_count;
	size_t memo_cap;
	hash_index memo_index;
	/* $ref targets, and whether their subtree holds a $ref of its own */
	target_kind *targets;
	size_t target_count;
	size_t target_cap;
	hash_index target_index;
	enum_set *enums;
	size_t enum_count;
	size_t enum_cap;
	hash_index enum_index;
	/* propertyNames checks a name as a string value made for it: kept
	 * until the end, so that no remembered result outlives its value */
	json_t *names;
	size_t check_steps, check_steps_max;
	size_t match_steps_left;
	size_t explains_left;
	size_t ref_repeats_left;
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

/* ---- hashing ------------------------------------------------------------ */

/* A 64-bit finalizer (MurmurHash3's): every input bit moves every output bit. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64_C(0xc4ceb9fe1a85ec53);
	x ^= x >> 33;
	return x;
}

static uint64_t hash_bytes(uint64_t seed, const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = seed ^ mix64((uint64_t)len), word;

	for (; len >= sizeof(word); p += sizeof(word), len -= sizeof(word)) {
		memcpy(&word, p, sizeof(word));
		h = mix64(h ^ word) + UINT64_C(0x9E3779B97F4A7C15);
	}
	word = 0;
	memcpy(&word, p, len);
	return mix64(h ^ word);
}

static uint64_t hash_pointer(uint64_t seed, const void *ptr)
{
	return mix64(seed ^ (uint64_t)(uintptr_t)ptr);
}

static void hash_index_free(hash_index *t)
{
	free(t->hashes);
	free(t->items);
	memset(t, 0, sizeof(*t));
}

static void hash_index_place(uint64_t *hashes, size_t *items, size_t slots, uint64_t hash, size_t item)
{
	size_t i = (size_t)hash & (slots - 1);

	while (items[i])
		i = (i + 1) & (slots - 1);
	hashes[i] = hash;
	items[i] = item + 1;
}

/* Add `item` under `hash` (several items may share a hash). */
static int hash_index_add(hash_index *t, uint64_t hash, size_t item)
{
	size_t slots, i;
	uint64_t *hashes;
	size_t *items;

	if ((t->count + 1) * 2 > t->slots) {
		slots = t->slots ? t->slots * 2 : HASH_MIN_SLOTS;
		hashes = calloc(slots, sizeof(*hashes));
		items = calloc(slots, sizeof(*items));
		if (!hashes || !items) {
			free(hashes);
			free(items);
			return MB_ENOMEM;
		}
		for (i = 0; i < t->slots; i++)
			if (t->items[i])
				hash_index_place(hashes, items, slots, t->hashes[i], t->items[i] - 1);
		free(t->hashes);
		free(t->items);
		t->hashes = hashes;
		t->items = items;
		t->slots = slots;
	}
	hash_index_place(t->hashes, t->items, t->slots, hash, item);
	t->count++;
	return 0;
}

/* The items stored under `hash`, one per call: *cursor starts at 0;
 * SIZE_MAX when there are no more. */
static size_t hash_index_next(const hash_index *t, uint64_t hash, size_t *cursor)
{
	size_t i;

	if (!t->slots)
		return SIZE_MAX;
	for (;;) {
		i = ((size_t)hash + (*cursor)++) & (t->slots - 1);
		if (!t->items[i])
			return SIZE_MAX;
		if (t->hashes[i] == hash)
			return t->items[i] - 1;
	}
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

/* Rewrite control characters of the text in `s` (cap bytes) as \n, \t or
 * \xHH, so that every message stays on one line whatever a key or a
 * pattern holds. What no longer fits is cut. */
static void escape_controls(char *s, size_t cap)
{
	char copy[MB_ERROR_TEXT_MAX + MB_ERROR_WHERE_MAX], esc[5];
	size_t i, j = 0, n;
	unsigned char ch;

	if (!cap)
		return;
	for (i = 0; s[i]; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7F)
			break;
	if (!s[i])
		return;
	snprintf(copy, sizeof(copy), "%s", s);
	for (i = 0; copy[i]; i++) {
		ch = (unsigned char)copy[i];
		if (ch == '\n')
			snprintf(esc, sizeof(esc), "\\n");
		else if (ch == '\t')
			snprintf(esc, sizeof(esc), "\\t");
		else if (ch == '\r')
			snprintf(esc, sizeof(esc), "\\r");
		else if (ch < 0x20 || ch == 0x7F)
			snprintf(esc, sizeof(esc), "\\x%02X", ch);
		else
			snprintf(esc, sizeof(esc), "%c", ch);
		n = strlen(esc);
		if (j + n >= cap)
			break;
		memcpy(s + j, esc, n);
		j += n;
	}
	s[j] = '\0';
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
	escape_controls(where, sizeof(where));
	escape_controls(text, sizeof(text));
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
	escape_controls(it->pointer, sizeof(it->pointer));
	escape_controls(it->message, sizeof(it->message));
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

/* Distinct tags, so that equal bits of different types hash apart. */
enum {
	HASH_TAG_NULL = 0x6e756c6c,
	HASH_TAG_TRUE,
	HASH_TAG_FALSE,
	HASH_TAG_NUMBER,
	HASH_TAG_REAL,
	HASH_TAG_STRING,
	HASH_TAG_ARRAY,
	HASH_TAG_OBJECT
};

/* Two doubles that bound the int64 range exactly (2^63). */
#define INT64_BOUND_AS_DOUBLE 9223372036854775808.0

/* A hash that agrees with values_equal: equal values hash the same (1 and
 * 1.0 too; an object's member order does not count). Recursion is bounded
 * by the nesting limit checked before validation. */
static uint64_t value_hash(uint64_t seed, const json_t *value)
{
	json_t *obj = (json_t *)value, *member; /* jansson iterators are not const */
	const char *key;
	size_t key_len, i;
	uint64_t h, sum = 0, bits;
	double d;

	switch (json_typeof(value)) {
	case JSON_INTEGER:
		return mix64(seed ^ HASH_TAG_NUMBER ^ (uint64_t)json_integer_value(value));
	case JSON_REAL:
		d = json_real_value(value);
		/* an integral real equals the integer of its value */
		if (d == floor(d) && d >= -INT64_BOUND_AS_DOUBLE && d < INT64_BOUND_AS_DOUBLE)
			return mix64(seed ^ HASH_TAG_NUMBER ^ (uint64_t)(int64_t)d);
		memcpy(&bits, &d, sizeof(bits));
		return mix64(seed ^ HASH_TAG_REAL ^ bits);
	case JSON_STRING:
		return hash_bytes(seed ^ HASH_TAG_STRING, json_string_value(value), json_string_length(value));
	case JSON_ARRAY:
		h = mix64(seed ^ HASH_TAG_ARRAY ^ json_array_size(value));
		for (i = 0; i < json_array_size(value); i++)
			h = mix64(h ^ value_hash(seed, json_array_get(value, i))) + UINT64_C(0x9E3779B97F4A7C15);
		return h;
	case JSON_OBJECT:
		/* a sum does not depend on the order of its terms */
		json_object_keylen_foreach(obj, key, key_len, member)
			sum += mix64(hash_bytes(seed, key, key_len) ^ (value_hash(seed, member) * 31));
		return mix64(seed ^ HASH_TAG_OBJECT ^ sum ^ mix64(json_object_size(value)));
	case JSON_TRUE:
		return mix64(seed ^ HASH_TAG_TRUE);
	case JSON_FALSE:
		return mix64(seed ^ HASH_TAG_FALSE);
	case JSON_NULL:
		break;
	}
	return mix64(seed ^ HASH_TAG_NULL);
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
	size_t cursor = 0, i;
	uint64_t h = hash_pointer(v->seed, node);

	while ((i = hash_index_next(&v->ids_by_node, h, &cursor)) != SIZE_MAX)
		if (v->ids[i].node == node)
			return &v->ids[i];
	return NULL;
}

static const id_entry *id_by_uri(const validator *v, const char *uri, size_t len)
{
	size_t cursor = 0, i;
	uint64_t h = hash_bytes(v->seed, uri, len);

	size_t first = SIZE_MAX;

	/* the first $id of the document wins when two name the same URI */
	while ((i = hash_index_next(&v->ids_by_uri, h, &cursor)) != SIZE_MAX)
		if (i < first && strlen(v->ids[i].uri) == len && memcmp(v->ids[i].uri, uri, len) == 0)
			first = i;
	return first == SIZE_MAX ? NULL : &v->ids[first];
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

/* ---- patterns: ECMA-262 regular expressions over code points ----------- */

/* Draft-07 patterns are ECMA-262 regular expressions, which match code
 * points, not bytes. They run here on a bounded engine: the pattern is
 * parsed into a tree, compiled into a Thompson program (counted repetitions
 * unrolled) and run as a Pike VM, which keeps at most one thread per
 * instruction, so a search costs at most (program length) x (code points)
 * steps and never backtracks. What this cannot do in bounded time is refused
 * with a reason: back-references, lookaround, Unicode property escapes.
 * Every search also draws on the validation's step budget (match_steps). */

/* Room for a real schema's patterns, far below what could hurt. */
#define PATTERN_MAX_BYTES MB_SCHEMA_PATTERN_MAX_BYTES
/* Groups inside groups: parsing and compiling recurse once per level. */
#define PATTERN_MAX_NESTING 32
/* The largest n or m of {n}, {n,}, {n,m}. */
#define PATTERN_MAX_COUNT 1000
/* Instructions after counted repetitions are unrolled: a{1000} is 1000,
 * (a{100}){100} would be 10000 and is refused. */
#define PATTERN_MAX_PROGRAM 8192
/* Nodes visited while unrolling, for repetitions of what emits nothing. */
#define PATTERN_MAX_VISITS 32768
#define CODE_POINT_MAX 0x10FFFFu
#define REPLACEMENT_CHARACTER 0xFFFDu
/* Counts as unbounded in a repetition's max. */
#define REPEAT_UNBOUNDED (-1)

typedef struct cp_range {
	uint32_t lo, hi; /* inclusive */
} cp_range;

typedef enum re_op {
	OP_CHAR,      /* x: the code point */
	OP_ANY,       /* '.': any code point but a line terminator */
	OP_CLASS,     /* ranges x .. x+y-1 of the program, sorted and merged */
	OP_SPLIT,     /* go on at x and at y */
	OP_JMP,       /* go on at x */
	OP_BOL,       /* ^: the start of the string */
	OP_EOL,       /* $: the end of the string */
	OP_WORD_B,    /* \b */
	OP_NOT_WORD_B, /* \B */
	OP_MATCH
} re_op;

typedef struct re_inst {
	uint32_t op;
	uint32_t x, y;
} re_inst;

/* A compiled pattern and the scratch its searches use (one search at a
 * time: validation is single-threaded and a search calls nothing back). */
struct re_prog {
	re_inst *code;
	size_t len;
	cp_range *ranges;
	size_t n_ranges;
	bool anchored;     /* starts with ^: no thread starts after position 0 */
	uint32_t *scratch; /* two sparse sets and a stack: 6 * len + 2 */
};

typedef enum re_kind {
	RN_EMPTY,
	RN_CHAR,   /* value: code point */
	RN_ANY,
	RN_CLASS,  /* value: first range, count: number of ranges */
	RN_ASSERT, /* value: OP_BOL, OP_EOL, OP_WORD_B or OP_NOT_WORD_B */
	RN_CAT,    /* child: first of a sibling list */
	RN_ALT,    /* child: first of a sibling list */
	RN_REPEAT  /* child: the repeated node; min, max */
} re_kind;

typedef struct re_node {
	re_kind kind;
	uint32_t value, count;
	int min, max;
	int child; /* -1: none */
	int next;  /* the next sibling in a CAT or ALT list, -1: none */
} re_node;

typedef struct re_parser {
	const char *at, *end;
	re_node *nodes;
	size_t n_nodes, cap_nodes;
	cp_range *ranges;
	size_t n_ranges, cap_ranges;
	int depth;
	const char *why; /* set on the first failure; "out of memory" too */
	char why_buf[96];
} re_parser;

static const char out_of_memory[] = "out of memory";

static bool re_failed(const re_parser *p)
{
	return p->why != NULL;
}

__attribute__((format(printf, 2, 3)))
static void re_fail(re_parser *p, const char *fmt, ...)
{
	va_list ap;

	if (p->why)
		return;
	va_start(ap, fmt);
	vsnprintf(p->why_buf, sizeof(p->why_buf), fmt, ap);
	va_end(ap);
	p->why = p->why_buf;
}

/* One code point of UTF-8 text; an invalid sequence reads as U+FFFD one
 * byte wide, so that every byte is looked at once. */
static uint32_t utf8_next(const unsigned char *s, size_t len, size_t *width)
{
	uint32_t cp;
	size_t n, i;

	if (s[0] < 0x80) {
		*width = 1;
		return s[0];
	}
	if ((s[0] & 0xE0) == 0xC0) {
		n = 2;
		cp = s[0] & 0x1Fu;
	} else if ((s[0] & 0xF0) == 0xE0) {
		n = 3;
		cp = s[0] & 0x0Fu;
	} else if ((s[0] & 0xF8) == 0xF0) {
		n = 4;
		cp = s[0] & 0x07u;
	} else {
		*width = 1;
		return REPLACEMENT_CHARACTER;
	}
	if (n > len) {
		*width = 1;
		return REPLACEMENT_CHARACTER;
	}
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			*width = 1;
			return REPLACEMENT_CHARACTER;
		}
		cp = (cp << 6) | (s[i] & 0x3Fu);
	}
	*width = n;
	return cp <= CODE_POINT_MAX ? cp : REPLACEMENT_CHARACTER;
}

static int re_new_node(re_parser *p, re_kind kind)
{
	re_node *node;

	if (re_failed(p))
		return -1;
	if (p->n_nodes == p->cap_nodes && grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes, sizeof(*p->nodes))) {
		p->why = out_of_memory;
		return -1;
	}
	node = &p->nodes[p->n_nodes];
	memset(node, 0, sizeof(*node));
	node->kind = kind;
	node->child = -1;
	node->next = -1;
	return (int)p->n_nodes++;
}

static void re_add_range(re_parser *p, uint32_t lo, uint32_t hi)
{
	if (re_failed(p))
		return;
	if (p->n_ranges == p->cap_ranges && grow((void **)&p->ranges, &p->cap_ranges, p->n_ranges, sizeof(*p->ranges))) {
		p->why = out_of_memory;
		return;
	}
	p->ranges[p->n_ranges].lo = lo;
	p->ranges[p->n_ranges].hi = hi;
	p->n_ranges++;
}

/* ECMA-262's \d, \w and \s (WhiteSpace and LineTerminator). */
static const cp_range digit_ranges[] = { { 0x30, 0x39 } };
static const cp_range word_ranges[] = { { 0x30, 0x39 }, { 0x41, 0x5A }, { 0x5F, 0x5F }, { 0x61, 0x7A } };
static const cp_range space_ranges[] = {
	{ 0x09, 0x0D }, { 0x20, 0x20 }, { 0xA0, 0xA0 }, { 0x1680, 0x1680 }, { 0x2000, 0x200A },
	{ 0x2028, 0x2029 }, { 0x202F, 0x202F }, { 0x205F, 0x205F }, { 0x3000, 0x3000 }, { 0xFEFF, 0xFEFF },
};

/* Append `set` (sorted, disjoint), or its complement. */
static void re_add_set(re_parser *p, const cp_range *set, size_t n, bool complement)
{
	uint32_t next = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!complement)
			re_add_range(p, set[i].lo, set[i].hi);
		else if (set[i].lo > next)
			re_add_range(p, next, set[i].lo - 1);
		next = set[i].hi + 1;
	}
	if (complement && next <= CODE_POINT_MAX)
		re_add_range(p, next, CODE_POINT_MAX);
}

/* The class escape letter `letter` (d, D, w, W, s, S): true when it is one. */
static bool re_add_class_escape(re_parser *p, char letter)
{
	bool complement = isupper((unsigned char)letter) != 0;

	switch (tolower((unsigned char)letter)) {
	case 'd': re_add_set(p, digit_ranges, COUNT_OF(digit_ranges), complement); return true;
	case 'w': re_add_set(p, word_ranges, COUNT_OF(word_ranges), complement); return true;
	case 's': re_add_set(p, space_ranges, COUNT_OF(space_ranges), complement); return true;
	default: return false;
	}
}

static int range_cmp(const void *a, const void *b)
{
	const cp_range *x = a, *y = b;

	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sort and merge the ranges from `start` on; with `negate`, replace them
 * by their complement. Returns how many there are now. */
static uint32_t re_finish_class(re_parser *p, size_t start, bool negate)
{
	cp_range *set = NULL;
	size_t n = p->n_ranges - start, merged = 0, i;

	if (re_failed(p))
		return 0;
	if (n) {
		set = malloc(n * sizeof(*set));
		if (!set) {
			p->why = out_of_memory;
			return 0;
		}
		memcpy(set, p->ranges + start, n * sizeof(*set));
		qsort(set, n, sizeof(*set), range_cmp);
		for (i = 1; i < n; i++) {
			if (set[i].lo <= set[merged].hi + 1) {
				if (set[i].hi > set[merged].hi)
					set[merged].hi = set[i].hi;
			} else {
				set[++merged] = set[i];
			}
		}
		merged++;
	}
	p->n_ranges = start;
	re_add_set(p, set, merged, negate);
	free(set);
	return (uint32_t)(p->n_ranges - start);
}

/* `digits` hex digits at p->at; -1 when they are not all there. */
static long re_hex(re_parser *p, int digits)
{
	long value = 0;
	int i, d;

	for (i = 0; i < digits; i++) {
		if (p->at + i >= p->end || (d = hex_digit(p->at[i])) < 0)
			return -1;
		value = value * 16 + d;
	}
	p->at += digits;
	return value;
}

/* After "\u": XXXX (and a low surrogate's \uXXXX after a high one), or
 * {X...} up to U+10FFFF. */
static long re_unicode_escape(re_parser *p)
{
	const char *save;
	long cp, lo;

	if (p->at < p->end && *p->at == '{') {
		p->at++;
		for (cp = 0; p->at < p->end && hex_digit(*p->at) >= 0 && cp <= (long)CODE_POINT_MAX; p->at++)
			cp = cp * 16 + hex_digit(*p->at);
		if (p->at >= p->end || *p->at != '}' || cp > (long)CODE_POINT_MAX)
			return -1;
		p->at++;
		return cp;
	}
	cp = re_hex(p, 4);
	if (cp >= 0xD800 && cp <= 0xDBFF && p->end - p->at >= 6 && p->at[0] == '\\' && p->at[1] == 'u') {
		save = p->at;
		p->at += 2;
		lo = re_hex(p, 4);
		if (lo >= 0xDC00 && lo <= 0xDFFF)
			return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
		p->at = save;
	}
	return cp;
}

/* What an escape stands for: one code point, a set of them (ranges
 * appended), or an assertion. */
typedef enum re_escape {
	ESC_CHAR,
	ESC_SET,
	ESC_ASSERT,
	ESC_BAD
} re_escape;

/* The escape after a backslash (p->at is past it). Inside a class \b is a
 * backspace and there are no assertions or back-references. */
static re_escape re_parse_escape(re_parser *p, bool in_class, uint32_t *out)
{
	char letter;
	long cp;

	if (p->at >= p->end) {
		re_fail(p, "trailing backslash");
		return ESC_BAD;
	}
	letter = *p->at++;
	if (re_add_class_escape(p, letter))
		return ESC_SET;
	switch (letter) {
	case 'n': *out = '\n'; return ESC_CHAR;
	case 'r': *out = '\r'; return ESC_CHAR;
	case 't': *out = '\t'; return ESC_CHAR;
	case 'f': *out = '\f'; return ESC_CHAR;
	case 'v': *out = '\v'; return ESC_CHAR;
	case 'b':
	case 'B':
		if (in_class && letter == 'b') {
			*out = '\b';
			return ESC_CHAR;
		}
		if (in_class)
			break;
		*out = letter == 'b' ? OP_WORD_B : OP_NOT_WORD_B;
		return ESC_ASSERT;
	case 'c':
		if (p->at < p->end && isalpha((unsigned char)*p->at)) {
			*out = (uint32_t)(*p->at++ % 32);
			return ESC_CHAR;
		}
		re_fail(p, "\\c must be followed by a letter");
		return ESC_BAD;
	case '0':
		if (p->at < p->end && isdigit((unsigned char)*p->at))
			break;
		*out = 0;
		return ESC_CHAR;
	case 'x':
	case 'u':
		cp = letter == 'x' ? re_hex(p, 2) : re_unicode_escape(p);
		if (cp < 0) {
			re_fail(p, "bad \\%c escape", letter);
			return ESC_BAD;
		}
		*out = (uint32_t)cp;
		return ESC_CHAR;
	case 'p':
	case 'P':
		re_fail(p, "escape not supported: \\%c (Unicode property escapes)", letter);
		return ESC_BAD;
	case 'k':
		re_fail(p, "escape not supported: \\k (back-references cannot be matched in bounded time)");
		return ESC_BAD;
	default:
		if (letter >= '1' && letter <= '9' && !in_class) {
			re_fail(p, "escape not supported: \\%c (back-references cannot be matched in bounded time)", letter);
			return ESC_BAD;
		}
		if (!isalnum((unsigned char)letter) && (unsigned char)letter >= 0x20 && (unsigned char)letter < 0x7F) {
			*out = (uint32_t)(unsigned char)letter;
			return ESC_CHAR;
		}
		break;
	}
	if ((unsigned char)letter >= 0x20 && (unsigned char)letter < 0x7F)
		re_fail(p, "escape not supported%s: \\%c", in_class ? " inside a character class" : "", letter);
	else
		re_fail(p, "escape not supported%s", in_class ? " inside a character class" : "");
	return ESC_BAD;
}

/* One class member: a code point (true) or a set escape (false, ranges
 * appended). */
static bool re_class_atom(re_parser *p, uint32_t *cp)
{
	size_t width;

	if (*p->at == '\\') {
		p->at++;
		return re_parse_escape(p, true, cp) == ESC_CHAR;
	}
	*cp = utf8_next((const unsigned char *)p->at, (size_t)(p->end - p->at), &width);
	p->at += width;
	return true;
}

/* "[...]" with p->at on the "[". ECMA: "[]" matches nothing, "[^]" any
 * code point; a "-" next to a set escape is a plain "-" (Annex B). */
static int re_parse_class(re_parser *p)
{
	size_t start = p->n_ranges;
	bool negate;
	uint32_t lo, hi;
	int node;

	p->at++;
	negate = p->at < p->end && *p->at == '^';
	p->at += negate;
	while (!re_failed(p) && p->at < p->end && *p->at != ']') {
		if (!re_class_atom(p, &lo))
			continue;
		if (p->end - p->at >= 2 && p->at[0] == '-' && p->at[1] != ']') {
			p->at++;
			if (!re_class_atom(p, &hi)) {
				re_add_range(p, lo, lo);
				re_add_range(p, '-', '-');
				continue;
			}
			if (hi < lo) {
				re_fail(p, "range out of order in character class");
				break;
			}
			re_add_range(p, lo, hi);
		} else {
			re_add_range(p, lo, lo);
		}
	}
	if (!re_failed(p) && p->at >= p->end)
		re_fail(p, "unterminated character class");
	if (re_failed(p))
		return -1;
	p->at++;
	node = re_new_node(p, RN_CLASS);
	if (node < 0)
		return -1;
	p->nodes[node].value = (uint32_t)start;
	p->nodes[node].count = re_finish_class(p, start, negate);
	return node;
}

/* The number at p->at, capped just above PATTERN_MAX_COUNT; -1: none. */
static int re_count(re_parser *p)
{
	long n = 0;

	if (p->at >= p->end || !isdigit((unsigned char)*p->at))
		return -1;
	for (; p->at < p->end && isdigit((unsigned char)*p->at); p->at++)
		if (n <= PATTERN_MAX_COUNT)
			n = n * 10 + (*p->at - '0');
	return (int)n;
}

/* {n}, {n,} or {n,m} at p->at: true with min and max set and p->at past
 * it; false with p->at untouched when the "{" is a plain character. */
static bool re_braces(re_parser *p, int *min, int *max)
{
	const char *save = p->at;

	p->at++;
	*min = re_count(p);
	*max = *min;
	if (*min >= 0 && p->at < p->end && *p->at == ',') {
		p->at++;
		*max = re_count(p);
		if (*max < 0)
			*max = REPEAT_UNBOUNDED;
	}
	if (*min < 0 || p->at >= p->end || *p->at != '}') {
		p->at = save;
		return false;
	}
	p->at++;
	return true;
}

static bool re_at_quantifier(re_parser *p)
{
	int min, max;
	const char *save = p->at;
	bool braces;

	if (p->at >= p->end)
		return false;
	if (*p->at == '*' || *p->at == '+' || *p->at == '?')
		return true;
	if (*p->at != '{')
		return false;
	braces = re_braces(p, &min, &max);
	p->at = save;
	return braces;
}

static int re_parse_alternation(re_parser *p);

/* "(...)", "(?:...)" or "(?<name>...)" with p->at on the "(". */
static int re_parse_group(re_parser *p)
{
	int node;

	p->at++;
	if (p->at < p->end && *p->at == '?') {
		if (p->end - p->at >= 2 && p->at[1] == ':') {
			p->at += 2;
		} else if (p->end - p->at >= 2 && (p->at[1] == '=' || p->at[1] == '!')) {
			re_fail(p, "lookaround (?%c...) is not supported", p->at[1]);
			return -1;
		} else if (p->end - p->at >= 3 && p->at[1] == '<' && (p->at[2] == '=' || p->at[2] == '!')) {
			re_fail(p, "lookaround (?<%c...) is not supported", p->at[2]);
			return -1;
		} else if (p->end - p->at >= 2 && p->at[1] == '<') {
			/* a named group matches as any group; only \k could tell */
			const char *name = p->at += 2;

			while (p->at < p->end && (isalnum((unsigned char)*p->at) || *p->at == '_' || *p->at == '$'))
				p->at++;
			if (p->at == name || p->at >= p->end || *p->at != '>') {
				re_fail(p, "bad group name");
				return -1;
			}
			p->at++;
		} else {
			re_fail(p, "invalid group \"(?\"");
			return -1;
		}
	}
	if (++p->depth > PATTERN_MAX_NESTING) {
		re_fail(p, "groups nest deeper than %d levels", PATTERN_MAX_NESTING);
		return -1;
	}
	node = re_parse_alternation(p);
	p->depth--;
	if (re_failed(p))
		return -1;
	if (p->at >= p->end || *p->at != ')') {
		re_fail(p, "missing )");
		return -1;
	}
	p->at++;
	return node;
}

static int re_leaf(re_parser *p, re_kind kind, uint32_t value)
{
	int node = re_new_node(p, kind);

	if (node >= 0)
		p->nodes[node].value = value;
	return node;
}

/* One atom: a character, ".", a class, an escape, an assertion or a group. */
static int re_parse_atom(re_parser *p)
{
	size_t start = p->n_ranges, width;
	uint32_t cp;
	int node;

	switch (*p->at) {
	case '(':
		return re_parse_group(p);
	case '[':
		return re_parse_class(p);
	case '.':
		p->at++;
		return re_new_node(p, RN_ANY);
	case '^':
		p->at++;
		return re_leaf(p, RN_ASSERT, OP_BOL);
	case '$':
		p->at++;
		return re_leaf(p, RN_ASSERT, OP_EOL);
	case '\\':
		p->at++;
		switch (re_parse_escape(p, false, &cp)) {
		case ESC_CHAR: return re_leaf(p, RN_CHAR, cp);
		case ESC_ASSERT: return re_leaf(p, RN_ASSERT, cp);
		case ESC_SET:
			node = re_new_node(p, RN_CLASS);
			if (node >= 0) {
				p->nodes[node].value = (uint32_t)start;
				p->nodes[node].count = re_finish_class(p, start, false);
			}
			return node;
		case ESC_BAD: return -1;
		}
		return -1;
	default:
		if (re_at_quantifier(p)) {
			re_fail(p, "nothing to repeat at \"%c\"", *p->at);
			return -1;
		}
		cp = utf8_next((const unsigned char *)p->at, (size_t)(p->end - p->at), &width);
		p->at += width;
		return re_leaf(p, RN_CHAR, cp);
	}
}

/* A quantifier after `atom`, if there is one. */
static int re_parse_quantifier(re_parser *p, int atom)
{
	int min, max, node;

	if (atom < 0 || !re_at_quantifier(p))
		return atom;
	if (p->nodes[atom].kind == RN_ASSERT) {
		re_fail(p, "nothing to repeat: an assertion cannot be quantified");
		return -1;
	}
	switch (*p->at) {
	case '*': min = 0; max = REPEAT_UNBOUNDED; p->at++; break;
	case '+': min = 1; max = REPEAT_UNBOUNDED; p->at++; break;
	case '?': min = 0; max = 1; p->at++; break;
	default: re_braces(p, &min, &max); break;
	}
	if (min > PATTERN_MAX_COUNT || max > PATTERN_MAX_COUNT) {
		re_fail(p, "repetition count above %d", PATTERN_MAX_COUNT);
		return -1;
	}
	if (max != REPEAT_UNBOUNDED && max < min) {
		re_fail(p, "numbers out of order in {} quantifier");
		return -1;
	}
	if (p->at < p->end && *p->at == '?')
		p->at++; /* lazy: the same strings match */
	if (re_at_quantifier(p)) {
		re_fail(p, "nothing to repeat at \"%c\"", *p->at);
		return -1;
	}
	node = re_new_node(p, RN_REPEAT);
	if (node < 0)
		return -1;
	p->nodes[node].child = atom;
	p->nodes[node].min = min;
	p->nodes[node].max = max;
	return node;
}

/* Terms up to "|", ")" or the end, as one RN_CAT. */
static int re_parse_sequence(re_parser *p)
{
	int cat = re_new_node(p, RN_CAT), last = -1, term;

	if (cat < 0)
		return -1;
	while (!re_failed(p) && p->at < p->end && *p->at != '|' && *p->at != ')') {
		term = re_parse_quantifier(p, re_parse_atom(p));
		if (term < 0)
			return -1;
		if (last < 0)
			p->nodes[cat].child = term;
		else
			p->nodes[last].next = term;
		last = term;
	}
	return re_failed(p) ? -1 : cat;
}

static int re_parse_alternation(re_parser *p)
{
	int alt = re_new_node(p, RN_ALT), last, seq;

	if (alt < 0)
		return -1;
	last = re_parse_sequence(p);
	p->nodes[alt].child = last;
	while (!re_failed(p) && p->at < p->end && *p->at == '|') {
		p->at++;
		seq = re_parse_sequence(p);
		if (seq < 0)
			return -1;
		p->nodes[last].next = seq;
		last = seq;
	}
	return re_failed(p) ? -1 : alt;
}

/* The end of a chain of jumps still to be patched (linked through their
 * targets). */
#define CHAIN_END UINT32_MAX

typedef struct re_emitter {
	re_inst *code;
	size_t len, cap;
	size_t visits; /* nodes emitted, unrolled copies included */
	const char *why; /* too long, or out of memory */
} re_emitter;

static size_t re_emit(re_emitter *e, re_op op, uint32_t x, uint32_t y)
{
	if (e->why)
		return 0;
	if (e->len >= PATTERN_MAX_PROGRAM) {
		e->why = "too complex: its counted repetitions unroll to more than "
			MB_SCHEMA_STRINGIFY(PATTERN_MAX_PROGRAM) " steps";
		return 0;
	}
	if (e->len == e->cap && grow((void **)&e->code, &e->cap, e->len, sizeof(*e->code))) {
		e->why = out_of_memory;
		return 0;
	}
	e->code[e->len].op = op;
	e->code[e->len].x = x;
	e->code[e->len].y = y;
	return e->len++;
}

static void re_emit_node(re_emitter *e, const re_parser *p, int index);

/* x{min,max}: min copies, then either a loop or (max - min) optional
 * copies that all skip to the end. */
static void re_emit_repeat(re_emitter *e, const re_parser *p, const re_node *node)
{
	size_t split, loop;
	uint32_t chain = CHAIN_END, next;
	int i, copies = node->min;

	if (node->max == REPEAT_UNBOUNDED && node->min > 0)
		copies--; /* the loop's body is the last copy: x+ */
	for (i = 0; i < copies && !e->why; i++)
		re_emit_node(e, p, node->child);
	if (node->max == REPEAT_UNBOUNDED && node->min > 0) {
		loop = e->len;
		re_emit_node(e, p, node->child);
		re_emit(e, OP_SPLIT, (uint32_t)loop, (uint32_t)e->len + 1);
	} else if (node->max == REPEAT_UNBOUNDED) {
		split = re_emit(e, OP_SPLIT, (uint32_t)e->len + 1, 0);
		re_emit_node(e, p, node->child);
		re_emit(e, OP_JMP, (uint32_t)split, 0);
		if (!e->why)
			e->code[split].y = (uint32_t)e->len;
	} else {
		for (i = node->min; i < node->max && !e->why; i++) {
			split = re_emit(e, OP_SPLIT, (uint32_t)e->len + 1, chain);
			chain = (uint32_t)split;
			re_emit_node(e, p, node->child);
		}
		/* every optional copy may be the last: each split's y leads out */
		for (; !e->why && chain != CHAIN_END; chain = next) {
			next = e->code[chain].y;
			e->code[chain].y = (uint32_t)e->len;
		}
	}
}

static void re_emit_node(re_emitter *e, const re_parser *p, int index)
{
	const re_node *node = &p->nodes[index];
	size_t split, jump;
	uint32_t chain = CHAIN_END, next;
	int child;

	if (e->why)
		return;
	/* (()){1000} unrolls to nothing a thousand times: count visits too */
	if (++e->visits > PATTERN_MAX_VISITS) {
		e->why = "too complex: its counted repetitions unroll to more than "
			MB_SCHEMA_STRINGIFY(PATTERN_MAX_VISITS) " parts";
		return;
	}
	switch (node->kind) {
	case RN_EMPTY: break;
	case RN_CHAR: re_emit(e, OP_CHAR, node->value, 0); break;
	case RN_ANY: re_emit(e, OP_ANY, 0, 0); break;
	case RN_CLASS: re_emit(e, OP_CLASS, node->value, node->count); break;
	case RN_ASSERT: re_emit(e, (re_op)node->value, 0, 0); break;
	case RN_CAT:
		for (child = node->child; child >= 0 && !e->why; child = p->nodes[child].next)
			re_emit_node(e, p, child);
		break;
	case RN_ALT:
		for (child = node->child; child >= 0 && !e->why; child = p->nodes[child].next) {
			if (p->nodes[child].next < 0) {
				re_emit_node(e, p, child);
				break;
			}
			split = re_emit(e, OP_SPLIT, (uint32_t)e->len + 1, 0);
			re_emit_node(e, p, child);
			jump = re_emit(e, OP_JMP, chain, 0);
			chain = (uint32_t)jump;
			if (!e->why)
				e->code[split].y = (uint32_t)e->len;
		}
		for (; !e->why && chain != CHAIN_END; chain = next) {
			next = e->code[chain].x;
			e->code[chain].x = (uint32_t)e->len;
		}
		break;
	case RN_REPEAT:
		re_emit_repeat(e, p, node);
		break;
	}
}

static void re_prog_free(re_prog *prog)
{
	free(prog->code);
	free(prog->ranges);
	free(prog->scratch);
	memset(prog, 0, sizeof(*prog));
}

/* Compile `pattern` (len bytes of UTF-8). On failure *why says why, in
 * words for "bad regex ...: <why>". */
static int re_compile(re_prog *out, const char *pattern, size_t len, const char **why)
{
	re_parser p;
	re_emitter e;
	int root, rc = 0;

	memset(out, 0, sizeof(*out));
	memset(&p, 0, sizeof(p));
	memset(&e, 0, sizeof(e));
	*why = NULL;
	if (len > PATTERN_MAX_BYTES) {
		*why = "longer than " MB_SCHEMA_STRINGIFY(PATTERN_MAX_BYTES) " bytes";
		return MB_EINVAL;
	}
	p.at = pattern;
	p.end = pattern + len;
	root = re_parse_alternation(&p);
	if (!re_failed(&p) && p.at < p.end)
		re_fail(&p, "unmatched )");
	if (re_failed(&p)) {
		rc = p.why == out_of_memory ? MB_ENOMEM : MB_EINVAL;
		/* the reason lives in the parser: keep it in a static buffer */
		goto cleanup;
	}
	re_emit_node(&e, &p, root);
	re_emit(&e, OP_MATCH, 0, 0);
	if (e.why) {
		rc = e.why == out_of_memory ? MB_ENOMEM : MB_EINVAL;
		*why = e.why;
		goto cleanup;
	}
	out->code = e.code;
	out->len = e.len;
	out->ranges = p.ranges;
	out->n_ranges = p.n_ranges;
	out->anchored = e.code[0].op == OP_BOL;
	/* zeroed: a sparse set reads slots it has not written (harmless, but
	 * memory checkers would say otherwise) */
	out->scratch = calloc(6 * e.len + 2, sizeof(*out->scratch));
	e.code = NULL;
	p.ranges = NULL;
	if (!out->scratch) {
		rc = MB_ENOMEM;
		re_prog_free(out);
	}
cleanup:
	if (rc && !*why) {
		static char reason[sizeof(p.why_buf)];

		snprintf(reason, sizeof(reason), "%s", p.why ? p.why : out_of_memory);
		*why = reason;
	}
	free(p.nodes);
	free(p.ranges);
	free(e.code);
	return rc;
}

/* A sparse set of program counters (Briggs and Torczon): O(1) insert,
 * membership and clear. */
typedef struct pc_set {
	uint32_t *dense, *sparse;
	uint32_t n;
} pc_set;

static bool pc_set_has(const pc_set *s, uint32_t pc)
{
	return s->sparse[pc] < s->n && s->dense[s->sparse[pc]] == pc;
}

static void pc_set_add(pc_set *s, uint32_t pc)
{
	s->sparse[pc] = s->n;
	s->dense[s->n++] = pc;
}

/* Where a search stands: the code points on either side of the position. */
typedef struct re_context {
	bool at_start, at_end;
	uint32_t before, after;
} re_context;

static bool is_word_char(uint32_t cp)
{
	return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
}

static bool is_line_terminator(uint32_t cp)
{
	return cp == '\n' || cp == '\r' || cp == 0x2028 || cp == 0x2029;
}

static bool class_has(const re_prog *prog, const re_inst *in, uint32_t cp)
{
	const cp_range *r;
	size_t lo = 0, hi = in->y, mid;

	if (!hi)
		return false; /* "[]"; a program of such classes has no ranges at all */
	r = prog->ranges + in->x;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (cp < r[mid].lo)
			hi = mid;
		else if (cp > r[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

/* Add `pc` and everything it reaches without reading a code point.
 * Returns true when that reaches OP_MATCH. */
static bool re_add_thread(const re_prog *prog, pc_set *set, uint32_t *stack, uint32_t pc, const re_context *ctx)
{
	size_t top = 0;
	const re_inst *in;
	bool word_before, word_after, matched = false;

	stack[top++] = pc;
	while (top) {
		pc = stack[--top];
		if (pc_set_has(set, pc))
			continue;
		pc_set_add(set, pc);
		in = &prog->code[pc];
		switch ((re_op)in->op) {
		case OP_JMP: stack[top++] = in->x; break;
		case OP_SPLIT:
			stack[top++] = in->y;
			stack[top++] = in->x;
			break;
		case OP_BOL:
			if (ctx->at_start)
				stack[top++] = pc + 1;
			break;
		case OP_EOL:
			if (ctx->at_end)
				stack[top++] = pc + 1;
			break;
		case OP_WORD_B:
		case OP_NOT_WORD_B:
			word_before = !ctx->at_start && is_word_char(ctx->before);
			word_after = !ctx->at_end && is_word_char(ctx->after);
			if ((word_before != word_after) == (in->op == OP_WORD_B))
				stack[top++] = pc + 1;
			break;
		case OP_MATCH: matched = true; break;
		default: break; /* reads a code point: stepped over later */
		}
	}
	return matched;
}

static bool re_step_matches(const re_prog *prog, const re_inst *in, uint32_t cp)
{
	switch ((re_op)in->op) {
	case OP_CHAR: return cp == in->x;
	case OP_ANY: return !is_line_terminator(cp);
	case OP_CLASS: return class_has(prog, in, cp);
	default: return false;
	}
}

/* Whether `prog` matches anywhere in `text` (len bytes). 1 or 0; -1 when
 * the search would exceed *budget steps (which it draws down). */
static int re_search(const re_prog *prog, const char *text, size_t len, size_t *budget)
{
	const unsigned char *s = (const unsigned char *)text;
	uint32_t *stack = prog->scratch + 4 * prog->len;
	pc_set lists[2] = {
		{ prog->scratch, prog->scratch + prog->len, 0 },
		{ prog->scratch + 2 * prog->len, prog->scratch + 3 * prog->len, 0 },
	};
	pc_set *cur = &lists[0], *next = &lists[1], *swap;
	re_context ctx = { true, len == 0, 0, 0 };
	size_t pos = 0, width = 0, next_width = 0, i, work;
	uint32_t cp = 0;

	if (len)
		ctx.after = cp = utf8_next(s, len, &width);
	for (;;) {
		if ((pos == 0 || !prog->anchored) && re_add_thread(prog, cur, stack, 0, &ctx))
			return 1;
		work = cur->n + 1;
		if (work > *budget)
			return -1;
		*budget -= work;
		if (pos >= len || (prog->anchored && cur->n == 0))
			return 0;
		/* the context after this code point */
		ctx.at_start = false;
		ctx.before = cp;
		ctx.at_end = pos + width >= len;
		ctx.after = ctx.at_end ? 0 : utf8_next(s + pos + width, len - pos - width, &next_width);
		next->n = 0;
		for (i = 0; i < cur->n; i++) {
			const re_inst *in = &prog->code[cur->dense[i]];

			if (re_step_matches(prog, in, cp) && re_add_thread(prog, next, stack, cur->dense[i] + 1, &ctx))
				return 1;
		}
		pos += width;
		cp = ctx.after;
		width = next_width;
		swap = cur;
		cur = next;
		next = swap;
	}
}

/* The compiled form of `pattern` (len bytes), compiled once per validation. */
static int regex_get(const re_prog **out, validator *v, const char *keyword, const char *pattern, size_t len)
{
	regex_entry *entry;
	char quoted[QUOTE_MAX_BYTES];
	const char *why = NULL;
	uint64_t h = hash_bytes(v->seed, pattern, len);
	size_t cursor = 0, i;
	json_t *text;
	int rc;

	while ((i = hash_index_next(&v->regex_index, h, &cursor)) != SIZE_MAX) {
		if (v->regexes[i].len == len && memcmp(v->regexes[i].pattern, pattern, len) == 0) {
			*out = v->regexes[i].prog;
			return 0;
		}
	}
	rc = grow((void **)&v->regexes, &v->regex_cap, v->regex_count, sizeof(*v->regexes));
	if (rc)
		return schema_fail(v, rc, keyword, "out of memory");
	entry = &v->regexes[v->regex_count];
	memset(entry, 0, sizeof(*entry));
	entry->pattern = malloc(len + 1);
	entry->prog = calloc(1, sizeof(*entry->prog));
	if (!entry->pattern || !entry->prog) {
		free(entry->pattern);
		free(entry->prog);
		return schema_fail(v, MB_ENOMEM, keyword, "out of memory");
	}
	memcpy(entry->pattern, pattern, len);
	entry->pattern[len] = '\0';
	entry->len = len;
	rc = re_compile(entry->prog, pattern, len, &why);
	if (rc) {
		free(entry->pattern);
		free(entry->prog);
		if (rc == MB_ENOMEM)
			return schema_fail(v, rc, keyword, "out of memory");
		text = json_stringn_nocheck(pattern, len);
		render(quoted, sizeof(quoted), text);
		json_decref(text);
		return schema_fail(v, rc, keyword, "bad regex %s: %s", quoted, why);
	}
	v->regex_count++;
	if (hash_index_add(&v->regex_index, h, v->regex_count - 1))
		return schema_fail(v, MB_ENOMEM, keyword, "out of memory");
	*out = entry->prog;
	return 0;
}

/* 1 on a match, 0 on none, or a negative code when the pattern is bad or
 * the document needs more pattern steps than its budget. */
static int regex_search(validator *v, const char *keyword, const char *pattern, size_t pattern_len,
	const char *text, size_t text_len)
{
	const re_prog *re = NULL;
	int rc = regex_get(&re, v, keyword, pattern, pattern_len);

	if (rc)
		return rc;
	rc = re_search(re, text, text_len, &v->match_steps_left);
	if (rc < 0)
		return schema_fail(v, MB_EINVAL, keyword,
			"refused: matching this document's strings against the schema's patterns needs more "
			"steps than its budget (%u + %u per byte of text)", MATCH_STEPS_BASE, MATCH_STEPS_PER_BYTE);
	return rc;
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
	if (hash_index_add(&v->ids_by_node, hash_pointer(v->seed, node), v->id_count - 1)
		|| hash_index_add(&v->ids_by_uri, hash_bytes(v->seed, uri, strlen(uri)), v->id_count - 1))
		return schema_fail(v, MB_ENOMEM, "$id", "out of memory");
	return 0;
}

/* Pass 2: resolve every $ref and compile every pattern, so that a broken
 * schema fails whatever instance comes. */
static int visit_prepare(validator *v, const json_t *node, const char *base)
{
	const json_t *ref = json_object_get(node, "$ref"), *target, *pattern, *map;
	const char *target_base, *key;
	const re_prog *re;
	json_t *child;
	size_t key_len;
	int rc = 0;

	if (ref)
		rc = resolve_ref(&target, &target_base, v, ref, base);
	pattern = json_object_get(node, "pattern");
	if (!rc && json_is_string(pattern))
		rc = regex_get(&re, v, "pattern", json_string_value(pattern), json_string_length(pattern));
	map = json_object_get(node, "patternProperties");
	if (!rc && json_is_object(map)) {
		/* jansson's iterators take non-const objects; they do not modify them */
		json_object_keylen_foreach((json_t *)map, key, key_len, child) {
			rc = regex_get(&re, v, "patternProperties", key, key_len);
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
	/* beyond size_t, no string, array or object can reach the count: as
	 * good as infinite (a cast would be undefined) */
	*out = number_of(value) >= (double)SIZE_MAX ? SIZE_MAX : (size_t)number_of(value);
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

/* Whether the large enum `values` holds `inst`: its members are hashed
 * once per validation. 1, 0, or a negative code. */
static int enum_has(validator *v, const json_t *values, const json_t *inst)
{
	uint64_t h = hash_pointer(v->seed, values);
	size_t cursor = 0, i, n = json_array_size(values);
	enum_set *set = NULL;

	while ((i = hash_index_next(&v->enum_index, h, &cursor)) != SIZE_MAX) {
		if (v->enums[i].values == values) {
			set = &v->enums[i];
			break;
		}
	}
	if (!set) {
		if (grow((void **)&v->enums, &v->enum_cap, v->enum_count, sizeof(*v->enums)))
			return schema_fail(v, MB_ENOMEM, "enum", "out of memory");
		set = &v->enums[v->enum_count++];
		memset(set, 0, sizeof(*set));
		set->values = values;
		if (hash_index_add(&v->enum_index, h, v->enum_count - 1))
			return schema_fail(v, MB_ENOMEM, "enum", "out of memory");
		for (i = 0; i < n; i++)
			if (hash_index_add(&set->members, value_hash(v->seed, json_array_get(values, i)), i))
				return schema_fail(v, MB_ENOMEM, "enum", "out of memory");
	}
	h = value_hash(v->seed, inst);
	cursor = 0;
	while ((i = hash_index_next(&set->members, h, &cursor)) != SIZE_MAX)
		if (values_equal(inst, json_array_get(values, i)))
			return 1;
	return 0;
}

static int kw_enum(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *values = kw->value[KW_ENUM];
	char value[QUOTE_MAX_BYTES], allowed[LIST_MAX_BYTES];
	size_t i;
	int found;

	if (!values)
		return 0;
	if (!json_is_array(values))
		return schema_fail(v, MB_EINVAL, "enum", "expected an array, got %s", type_name(values));
	if (json_array_size(values) > LINEAR_COMPARE_MAX) {
		found = enum_has(v, values, inst);
		if (found < 0)
			return found;
		if (found)
			return 0;
	} else {
		for (i = 0; i < json_array_size(values); i++)
			if (values_equal(inst, json_array_get(values, i)))
				return 0;
	}
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
	found = regex_search(v, "pattern", json_string_value(pattern), json_string_length(pattern),
		json_string_value(inst), json_string_length(inst));
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

typedef struct hashed_item {
	uint64_t hash;
	size_t index;
} hashed_item;

static int hashed_item_cmp(const void *a, const void *b)
{
	const hashed_item *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

typedef struct equal_pair {
	size_t first, second;
} equal_pair;

static int equal_pair_cmp(const void *a, const void *b)
{
	const equal_pair *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

/* Small arrays, item by item. */
static int check_unique_pairwise(validator *v, const json_t *inst, mb_schema_report *sink)
{
	size_t n = json_array_size(inst), i, j;
	int rc = 0;

	for (i = 0; i < n && !should_stop(rc, sink); i++) {
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

/* Each item that equals a later one is reported with the first later one
 * equal to it, in the order of the items, as the pairwise check does; but
 * items are sorted by hash first, so only items of equal hash are compared:
 * linear in the array (plus the sort), not quadratic. Within one hash, the
 * items fall into classes of equal values; each joins the class it equals. */
static int check_unique(validator *v, const json_t *inst, mb_schema_report *sink)
{
	size_t n = json_array_size(inst), run, end, k, c, n_classes, n_pairs = 0;
	hashed_item *items = NULL;
	equal_pair *pairs = NULL;
	size_t *first = NULL, *last = NULL;
	const json_t *item;
	int rc = 0;

	if (n <= LINEAR_COMPARE_MAX)
		return check_unique_pairwise(v, inst, sink);
	items = malloc(n * sizeof(*items));
	pairs = malloc(n * sizeof(*pairs));
	first = malloc(n * sizeof(*first));
	last = malloc(n * sizeof(*last));
	if (!items || !pairs || !first || !last) {
		rc = schema_fail(v, MB_ENOMEM, "uniqueItems", "out of memory");
		goto cleanup;
	}
	for (k = 0; k < n; k++) {
		items[k].hash = value_hash(v->seed, json_array_get(inst, k));
		items[k].index = k;
	}
	qsort(items, n, sizeof(*items), hashed_item_cmp);
	for (run = 0; run < n && (sink || !n_pairs); run = end) {
		for (end = run + 1; end < n && items[end].hash == items[run].hash; end++)
			;
		n_classes = 0;
		for (k = run; k < end; k++) {
			item = json_array_get(inst, items[k].index);
			for (c = 0; c < n_classes && !values_equal(json_array_get(inst, first[c]), item); c++)
				;
			if (c < n_classes) {
				pairs[n_pairs].first = last[c];
				pairs[n_pairs++].second = items[k].index;
				last[c] = items[k].index;
			} else {
				first[n_classes] = last[n_classes] = items[k].index;
				n_classes++;
			}
		}
	}
	if (!n_pairs)
		goto cleanup;
	rc = MB_ESCHEMA;
	qsort(pairs, n_pairs, sizeof(*pairs), equal_pair_cmp);
	for (k = 0; k < n_pairs && sink; k++)
		issue(v, sink, "uniqueItems", "items %zu and %zu are equal", pairs[k].first, pairs[k].second);
cleanup:
	free(items);
	free(pairs);
	free(first);
	free(last);
	return rc;
}

static int kw_array_size(validator *v, const keywords *kw, const json_t *inst, mb_schema_report *sink)
{
	const json_t *unique = kw->value[KW_UNIQUE_ITEMS];
	size_t min_items = 0, max_items = 0, n = json_array_size(inst);
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
	if (json_is_true(unique) && !should_stop(rc, sink))
		rc = merge(rc, check_unique(v, inst, sink));
	return rc;
}

static int expect_object(validator *v, const json_t *value, const char *keyword)
{
	if (value && !json_is_object(value))
		return schema_fail(v, MB_EINVAL, keyword, "expected an object, got %s", type_name(value));
	return 0;
}

/* properties, patternProperties and additionalProperties for one member. */
static int check_member(validator *v, const keywords *kw, const char *key, size_t key_len,
	const json_t *value, mb_schema_report *sink)
{
	const json_t *props = kw->value[KW_PROPERTIES];
	const json_t *extra = kw->value[KW_ADDITIONAL_PROPERTIES];
	json_t *pats = (json_t *)kw->value[KW_PATTERN_PROPERTIES], *sub; /* iterated below */
	const char *pattern;
	size_t pattern_len;
	bool matched = false;
	int rc = 0, found;

	sub = props ? json_object_getn(props, key, key_len) : NULL;
	if (sub) {
		matched = true;
		rc = descend(v, sub, value, sink, "properties", key);
	}
	if (pats) {
		json_object_keylen_foreach(pats, pattern, pattern_len, sub) {
			if (should_stop(rc, sink))
				break;
			found = regex_search(v, "patternProperties", pattern, pattern_len, key, key_len);
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
		rc = merge(rc, check_member(v, kw, key, key_len, value, sink));
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
		if (!json_is_object(inst) || json_object_getn(inst, json_string_value(name), json_string_length(name)))
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
	json_t *name = json_stringn_nocheck(key, key_len);
	mb_schema_report *inner = NULL;
	size_t old;
	int rc;

	if (!name || json_array_append_new(v->names, name))
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
			if (json_object_getn(inst, json_string_value(name), json_string_length(name)))
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
	if (!v->explains_left) {
		issue(v, sink, keyword, "no alternative matches");
		goto cleanup;
	}
	v->explains_left--;
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

static uint64_t memo_hash(const validator *v, const json_t *target, const json_t *inst, const char *base)
{
	return mix64(hash_pointer(v->seed, target) ^ hash_pointer(v->seed + 1, inst)
		^ hash_pointer(v->seed + 2, base));
}

/* What is known of `target` against `inst` from `base`: NULL when nothing. */
static const memo_entry *memo_find(const validator *v, const json_t *target, const json_t *inst,
	const char *base)
{
	size_t cursor = 0, i;
	uint64_t h = memo_hash(v, target, inst, base);

	while ((i = hash_index_next(&v->memo_index, h, &cursor)) != SIZE_MAX)
		if (v->memo[i].target == target && v->memo[i].instance == inst && v->memo[i].base == base)
			return &v->memo[i];
	return NULL;
}

/* Remember a finished evaluation; a full table only stops remembering. */
static int memo_add(validator *v, const json_t *target, const json_t *inst, const char *base, bool valid)
{
	memo_entry *e;

	if (v->memo_count >= MEMO_MAX_ENTRIES)
		return 0;
	if (grow((void **)&v->memo, &v->memo_cap, v->memo_count, sizeof(*v->memo)))
		return schema_fail(v, MB_ENOMEM, "$ref", "out of memory");
	e = &v->memo[v->memo_count];
	e->target = target;
	e->instance = inst;
	e->base = base;
	e->valid = valid;
	if (hash_index_add(&v->memo_index, memo_hash(v, target, inst, base), v->memo_count))
		return schema_fail(v, MB_ENOMEM, "$ref", "out of memory");
	v->memo_count++;
	return 0;
}

/* Whether the schema `node` holds a "$ref" anywhere below it (definitions
 * included: a little too often, never too seldom). */
static bool subtree_refers(const json_t *node, size_t depth)
{
	json_t *obj = (json_t *)node, *child; /* jansson iterators are not const */
	const char *key;
	size_t i;

	if (json_is_array(node)) {
		for (i = 0; i < json_array_size(node); i++)
			if (subtree_refers(json_array_get(node, i), depth + 1))
				return true;
		return false;
	}
	if (!json_is_object(node))
		return false;
	/* deeper than anything check() may walk: say yes, it costs only memory */
	if (depth >= MB_SCHEMA_MAX_NESTING || json_object_get(node, "$ref"))
		return true;
	json_object_foreach(obj, key, child)
		if ((json_is_object(child) || json_is_array(child)) && strcmp(key, "enum") && strcmp(key, "const")
			&& subtree_refers(child, depth + 1))
			return true;
	return false;
}

/* Whether `target` refers further; worked out once per target. A negative
 * code when out of memory. */
static int target_refers(validator *v, const json_t *target)
{
	uint64_t h = hash_pointer(v->seed, target);
	size_t cursor = 0, i;
	target_kind *k;

	while ((i = hash_index_next(&v->target_index, h, &cursor)) != SIZE_MAX)
		if (v->targets[i].target == target)
			return v->targets[i].refers;
	if (grow((void **)&v->targets, &v->target_cap, v->target_count, sizeof(*v->targets))
		|| hash_index_add(&v->target_index, h, v->target_count))
		return schema_fail(v, MB_ENOMEM, "$ref", "out of memory");
	k = &v->targets[v->target_count++];
	k->target = target;
	k->refers = subtree_refers(target, 0);
	return k->refers;
}

/* A $ref target is evaluated once per value it meets (from one base): the
 * result is remembered, so that definitions shared by many paths (a chain
 * of anyOf over the same $ref) cost one walk each, not one per path. A
 * remembered success is final; a remembered failure is walked again only
 * where its issues are wanted, a bounded number of times. */
static int follow_ref(validator *v, const json_t *ref, const json_t *inst, mb_schema_report *sink)
{
	char saved_loc[SCHEMA_LOCATION_MAX];
	size_t saved_len = v->loc_len, i;
	const char *saved_base = v->base, *target_base = NULL;
	const json_t *target = NULL;
	const memo_entry *known = NULL;
	int rc, refers;

	rc = resolve_ref(&target, &target_base, v, ref, v->base);
	if (rc)
		return rc;
	/* a target that refers no further cannot multiply paths: not worth
	 * remembering (a receipt's samples each meet one) */
	refers = target_refers(v, target);
	if (refers < 0)
		return refers;
	if (refers)
		known = memo_find(v, target, inst, target_base);
	if (known && (known->valid || !sink))
		return known->valid ? 0 : MB_ESCHEMA;
	if (known && !v->ref_repeats_left) {
		issue(v, sink, "$ref", "value fails \"%s\" (its issues are reported where it was checked first)",
			json_string_value(ref));
		return MB_ESCHEMA;
	}
	if (known)
		v->ref_repeats_left--;
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
	if (refers && !known && !is_fatal(rc))
		rc = merge(rc, memo_add(v, target, inst, target_base, rc == 0));
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
	if (++v->check_steps > v->check_steps_max)
		return schema_fail(v, MB_EINVAL, "", "refused: validating this document needs more than %zu "
			"schema checks (%u + %u per value); the schema's references and combinators expand too far",
			v->check_steps_max, CHECK_STEPS_BASE, CHECK_STEPS_PER_VALUE);
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
		re_prog_free(v->regexes[i].prog);
		free(v->regexes[i].prog);
		free(v->regexes[i].pattern);
	}
	for (i = 0; i < v->enum_count; i++)
		hash_index_free(&v->enums[i].members);
	free(v->ids);
	hash_index_free(&v->ids_by_node);
	hash_index_free(&v->ids_by_uri);
	free(v->regexes);
	hash_index_free(&v->regex_index);
	free(v->memo);
	hash_index_free(&v->memo_index);
	free(v->targets);
	hash_index_free(&v->target_index);
	free(v->enums);
	hash_index_free(&v->enum_index);
	json_decref(v->names);
	free(v->refs);
	free(v->root_uri);
	free(v);
}

/* ---- documents ------------------------------------------------------------ */

typedef struct doc_stats {
	size_t values;     /* every value, containers included */
	size_t text_bytes; /* strings and member names */
} doc_stats;

/* Count `value`; false when it nests deeper than MB_SCHEMA_MAX_NESTING
 * (the recursion stops there, so it is bounded whatever the value). */
static bool measure(const json_t *value, size_t depth, doc_stats *st)
{
	json_t *obj = (json_t *)value, *member; /* jansson iterators are not const */
	const char *key;
	size_t key_len, i;

	st->values++;
	if (json_is_string(value))
		st->text_bytes += json_string_length(value);
	if (!json_is_array(value) && !json_is_object(value))
		return true;
	if (depth >= MB_SCHEMA_MAX_NESTING)
		return false;
	for (i = 0; i < json_array_size(value); i++)
		if (!measure(json_array_get(value, i), depth + 1, st))
			return false;
	json_object_keylen_foreach(obj, key, key_len, member) {
		st->text_bytes += key_len;
		if (!measure(member, depth + 1, st))
			return false;
	}
	return true;
}

static size_t saturating_budget(size_t base, size_t per_unit, size_t units)
{
	return units > (SIZE_MAX - base) / per_unit ? SIZE_MAX : base + per_unit * units;
}

static uint64_t fresh_seed(const void *salt)
{
	uint64_t seed = 0;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
		seed = (uint64_t)(uintptr_t)salt; /* only speed, never a result, depends on it */
	return mix64(seed);
}

/* Measure both documents and set the budgets from their size. */
static int size_up(validator *v, const json_t *schema, const json_t *instance, mb_error *err)
{
	doc_stats s = { 0, 0 }, i = { 0, 0 };

	if (!measure(schema, 0, &s))
		return mb_error_set(err, MB_EINVAL, "schema", "refused: arrays and objects nest deeper than %d levels",
			MB_SCHEMA_MAX_NESTING);
	if (!measure(instance, 0, &i))
		return mb_error_set(err, MB_EINVAL, "", "refused: arrays and objects nest deeper than %d levels",
			MB_SCHEMA_MAX_NESTING);
	v->check_steps_max = saturating_budget(CHECK_STEPS_BASE, CHECK_STEPS_PER_VALUE, s.values + i.values);
	v->match_steps_left = saturating_budget(MATCH_STEPS_BASE, MATCH_STEPS_PER_BYTE, i.text_bytes);
	v->explains_left = EXPLAIN_BUDGET;
	v->ref_repeats_left = REF_REPEAT_BUDGET;
	return 0;
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
	v->seed = fresh_seed(v);
	v->names = json_array();
	v->loc_len = (size_t)snprintf(v->loc, sizeof(v->loc), "#");
	if (!v->names) {
		rc = mb_error_set(err, MB_ENOMEM, "", "out of memory");
		goto cleanup;
	}
	rc = size_up(v, schema, instance, err);
	if (!rc)
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

/* One line per kept issue; the parts were made single-line by issue(). */
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

/* ---- reading documents ------------------------------------------------- */

int mb_schema_load_buffer(json_t **out, const char *text, size_t len, const char *name, mb_error *err)
{
	char where[MB_ERROR_WHERE_MAX];
	json_error_t jerr;

	*out = NULL;
	if (!name)
		name = "<buffer>";
	if (!text)
		return mb_error_set(err, MB_EINVAL, name, "no JSON text given");
	if (len > MB_SCHEMA_FILE_MAX_BYTES)
		return mb_error_set(err, MB_EINVAL, name, "refused: %zu bytes, more than the %u a JSON document may have",
			len, MB_SCHEMA_FILE_MAX_BYTES);
	*out = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	if (!*out) {
		snprintf(where, sizeof(where), "%s:%d:%d", name, jerr.line, jerr.column);
		escape_controls(jerr.text, sizeof(jerr.text));
		return mb_error_set(err, MB_EINVAL, where, "not valid JSON: %s", jerr.text);
	}
	return 0;
}

int mb_schema_load_file(json_t **out, const char *path, mb_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = mb_read_file(&text, &len, path, MB_SCHEMA_FILE_MAX_BYTES, "a JSON document", err);
	if (!rc)
		rc = mb_schema_load_buffer(out, text, len, path, err);
	free(text);
	return rc;
}
