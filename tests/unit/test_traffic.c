/* Every catalog row's launch-by-launch bytes model (mb_row.traffic), at
 * every shape and dtype of suites/smoke.toml and suites/nam56r.toml: the
 * fused variant's launches add up to the row's `bytes` model, as does the
 * reference's one launch; the fallback models one entry per launch it
 * declares, each named by one of its kernel patterns, and uses every
 * pattern it declares (what CUPTI would otherwise call a signature
 * finding); every launch moves bytes; and the fallback moves at least what
 * the fused kernel does. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "harness/suite.h"
#include "testutil.h"

static const char *const SUITES[] = {"suites/smoke.toml", "suites/nam56r.toml"};

static bool declares_pattern(const mb_variant *v, const char *kernel)
{
	for (int p = 0; kernel && p < MB_MAX_KERNEL_PATTERNS && v->kernel_patterns[p]; p++) {
		if (strcmp(v->kernel_patterns[p], kernel) == 0)
			return true;
	}
	return false;
}

/* The variant's model at one shape: its entries checked, their total in
 * *out_total; returns the entry count (-1 when the row has none). */
static int check_variant(const mb_row *row, const mb_variant *v, const int64_t *axis, mb_dtype dtype,
	const char *id, uint64_t *out_total)
{
	mb_launch_traffic *launches = NULL;
	uint64_t total = 0;
	int n;

	/* counted, then filled: no row's launches are capped */
	n = row->traffic(axis, dtype, v, NULL);
	CHECK_MSG(n >= 1, "%s %s: %d launches in the model", id, v->name, n);
	if (n < 1 || !(launches = calloc((size_t)n, sizeof(*launches))))
		return -1;
	CHECK_MSG(row->traffic(axis, dtype, v, launches) == n, "%s %s: %d launches counted, another number filled",
		id, v->name, n);
	for (int i = 0; i < n; i++) {
		CHECK_MSG(launches[i].kernel != NULL, "%s %s: launch %d has no kernel", id, v->name, i);
		CHECK_MSG(launches[i].read_bytes + launches[i].write_bytes > 0, "%s %s: launch %d (%s) moves nothing",
			id, v->name, i, launches[i].kernel ? launches[i].kernel : "?");
		if (v->kind != MB_VARIANT_REFERENCE)
			CHECK_MSG(declares_pattern(v, launches[i].kernel),
				"%s %s: launch %d's kernel %s is none of its patterns", id, v->name, i,
				launches[i].kernel ? launches[i].kernel : "(null)");
		total += launches[i].read_bytes + launches[i].write_bytes;
	}
	if (v->kind == MB_VARIANT_REFERENCE) {
		CHECK_MSG(n == 1, "%s reference: %d launches, not 1", id, n);
	} else {
		CHECK_MSG(n == v->launches_per_call, "%s %s: %d launches in the model, %d declared", id, v->name, n,
			v->launches_per_call);
		for (int p = 0; p < MB_MAX_KERNEL_PATTERNS && v->kernel_patterns[p]; p++) {
			bool used = false;
			for (int i = 0; i < n; i++) {
				const char *k = launches[i].kernel;
				used = used || (k && strcmp(k, v->kernel_patterns[p]) == 0);
			}
			CHECK_MSG(used, "%s %s: pattern %s declared but no launch of the model runs it", id, v->name,
				v->kernel_patterns[p]);
		}
	}
	*out_total = total;
	free(launches);
	return n;
}

/* Every variant of the case's row at the case's shape and dtype. */
static void check_case(const mb_case_plan *c)
{
	const mb_row *row = c->row;
	const uint64_t bytes = row->bytes(c->axis, c->dtype);
	uint64_t fused_total = 0, fallback_total = 0;
	bool has_fused = false, has_fallback = false;

	/* only a row whose launches a library picks (their count grows with the
	 * shape: cuBLAS chunks) may go without a launch-by-launch model */
	bool library = false;
	for (int k = 0; k < row->n_variants; k++)
		library = library || row->variants[k].library_kernels;
	CHECK_MSG(row->traffic != NULL || library, "%s: the row has no traffic model", row->name);
	if (!row->traffic)
		return;
	for (int k = 0; k < row->n_variants; k++) {
		const mb_variant *v = &row->variants[k];
		uint64_t total = 0;
		if (check_variant(row, v, c->axis, c->dtype, c->id, &total) < 0)
			continue;
		if (v->kind == MB_VARIANT_FUSED || v->kind == MB_VARIANT_REFERENCE)
			CHECK_MSG(total == bytes, "%s %s: model total %" PRIu64 " bytes, bytes() %" PRIu64, c->id,
				v->name, total, bytes);
		if (v->kind == MB_VARIANT_FUSED) {
			has_fused = true;
			fused_total = total;
		} else if (v->kind == MB_VARIANT_FALLBACK) {
			has_fallback = true;
			fallback_total = total;
		}
	}
	if (has_fused && has_fallback)
		CHECK_MSG(fallback_total >= fused_total, "%s: fallback moves %" PRIu64 " bytes, fused %" PRIu64, c->id,
			fallback_total, fused_total);
}

static void check_suite(const char *rel, bool *rows_seen, size_t n_rows)
{
	mb_suite *suite = NULL;
	mb_plan *plan = NULL;
	mb_error err = {0};
	size_t count = 0;
	const mb_row *const *rows = mb_catalog_rows(&count);

	CHECK_MSG(mb_suite_load(&suite, mb_test_src(rel), &err) == 0, "%s: %s", rel, err.text);
	if (!suite)
		return;
	/* the cpu plan: the reference variant of every shape and dtype; every
	 * variant of the row is checked at each */
	CHECK_MSG(mb_plan_build(&plan, suite, NULL, "cpu", &err) == 0, "%s: %s", rel, err.text);
	for (size_t i = 0; plan && i < plan->n_cases; i++) {
		check_case(&plan->cases[i]);
		for (size_t r = 0; r < count && r < n_rows; r++)
			rows_seen[r] = rows_seen[r] || rows[r] == plan->cases[i].row;
	}
	mb_plan_free(plan);
	mb_suite_free(suite);
}

int main(void)
{
	size_t count = 0;
	const mb_row *const *rows = mb_catalog_rows(&count);
	bool seen[64] = {false};

	CHECK(count <= sizeof(seen) / sizeof(seen[0]));
	for (size_t s = 0; s < sizeof(SUITES) / sizeof(SUITES[0]); s++)
		check_suite(SUITES[s], seen, sizeof(seen) / sizeof(seen[0]));
	/* the suites cover every catalog row, so every row's model was checked */
	for (size_t r = 0; r < count && r < sizeof(seen) / sizeof(seen[0]); r++)
		CHECK_MSG(seen[r], "%s: in neither suite, so its traffic model went unchecked", rows[r]->name);
	return mb_test_finish("test_traffic");
}
