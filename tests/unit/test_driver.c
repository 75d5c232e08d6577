/* The case driver on the CPU backend:
 *  - the receipt's row_sample_seed reproduces the checked rows exactly: a
 *    variant with one wrong element in the middle row fails exactly when
 *    mb_check_rows_pick(rows_total, max_check_rows, row_sample_seed) lists
 *    that row, over many seeds, so both outcomes are seen;
 *  - cases of one row, shape and dtype share their inputs' seed, other
 *    shapes do not;
 *  - every phase of the case is accounted, and a correct variant passes;
 *  - a multi-rank backend (a stand-in for nccl_backend.c over two ranks of
 *    moe_alltoall, the "device" host memory) gets the whole case, every
 *    rank's rows stacked, for the sample, the reference and read_rows; its
 *    exact check runs after both checked calls with the sample; a variant
 *    that only moves bytes is judged by that check alone; rows moved wrongly
 *    fail a case whose outputs are right; the bytes it measured and its
 *    collective record reach the receipt. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/backend.h"
#include "harness/check.h"
#include "harness/case_driver.h"
#include "harness/host_inputs.h"
#include "kernels/moe_alltoall.h"
#include "testutil.h"

#define N_ROWS 64
#define N_COLS 8
#define CHECKED 16
#define SEEDS 48

typedef struct results {
	json_t *cases[4];
	mb_phase_ns phases;
	int n;
} results;

static int keep(void *ctx, size_t index, const json_t *result, const mb_phase_ns *phases)
{
	results *r = ctx;

	(void)index;
	if (r->n < 4)
		r->cases[r->n++] = json_incref((json_t *)result);
	r->phases.goodput += phases->goodput;
	r->phases.correctness += phases->correctness;
	r->phases.input_generation += phases->input_generation;
	r->phases.reference += phases->reference;
	return 0;
}

static void settings_init(mb_settings *s, uint64_t seed)
{
	/* short: the sample and the groups are the point, not the numbers */
	*s = (mb_settings){.seed = seed, .n_modes = 1, .modes = {MB_MODE_COLD}, .max_noise = 0.5,
		.min_samples = 3, .max_samples = 10, .min_time_s = 0, .timeout_s = 1, .warmup = 1,
		.max_check_rows = CHECKED};
}

static void plan_case(mb_case_plan *p, const char *row_name, const char *variant, int64_t rows)
{
	memset(p, 0, sizeof(*p));
	p->row = mb_catalog_find(row_name);
	p->variant = p->row ? mb_row_find_variant(p->row, variant) : NULL;
	p->dtype = MB_FP32;
	p->mode = MB_MODE_COLD;
	p->weight = 1;
	p->axis[0] = rows;
	p->axis[1] = N_COLS;
	snprintf(p->family, sizeof(p->family), "unit");
	snprintf(p->id, sizeof(p->id), "%s/%s/fp32/cold/unit/N=%lld,C=%d", row_name, variant, (long long)rows, N_COLS);
}

static int run(results *out, mb_case_plan *cases, size_t n, const mb_settings *s)
{
	mb_plan plan = {.cases = cases, .n_cases = n};
	mb_driver_hooks hooks = {.ctx = out, .case_done = keep};
	size_t failed_at = 0;
	mb_error err;

	memset(out, 0, sizeof(*out));
	return mb_driver_run(mb_backend_cpu(), &plan, 0, n, s, NULL, &hooks, &failed_at, &err);
}

static void free_results(results *r)
{
	for (int i = 0; i < r->n; i++)
		json_decref(r->cases[i]);
}

static void test_sample_reproduced(void)
{
	int caught = 0, missed = 0;

	for (uint64_t seed = 1; seed <= SEEDS; seed++) {
		mb_case_plan p;
		mb_settings s;
		results r;
		int64_t *rows = NULL, n = 0;
		mb_error err;
		bool sampled_middle = false;

		settings_init(&s, seed);
		plan_case(&p, "test_wrong_element", "host", N_ROWS);
		CHECK(p.variant != NULL);
		if (!p.variant || run(&r, &p, 1, &s) != 0 || r.n != 1) {
			CHECK(false);
			continue;
		}
		const json_t *corr = json_object_get(r.cases[0], "correctness");
		json_int_t row_seed = json_integer_value(json_object_get(corr, "row_sample_seed"));
		CHECK(json_integer_value(json_object_get(corr, "rows_checked")) == CHECKED);
		CHECK(json_integer_value(json_object_get(corr, "rows_total")) == N_ROWS);
		CHECK(mb_check_rows_pick(&rows, &n, N_ROWS, CHECKED, (uint64_t)row_seed, &err) == 0 && n == CHECKED);
		for (int64_t i = 0; rows && i < n; i++)
			sampled_middle = sampled_middle || rows[i] == N_ROWS / 2;
		bool failed = strcmp(json_string_value(json_object_get(r.cases[0], "status")), "failed") == 0;
		CHECK_MSG(failed == sampled_middle, "seed %llu: the case %s but the reproduced sample %s row %d",
			(unsigned long long)seed, failed ? "failed" : "passed", sampled_middle ? "holds" : "misses",
			N_ROWS / 2);
		caught += failed;
		missed += !failed;
		free(rows);
		free_results(&r);
	}
	/* a sample of 16 of 64 rows holds the middle one a quarter of the time */
	CHECK_MSG(caught > 0 && missed > 0, "caught %d, missed %d: both outcomes must occur", caught, missed);
}

static void test_groups(void)
{
	mb_case_plan p[3];
	mb_settings s;
	results r;

	settings_init(&s, 7);
	plan_case(&p[0], "test_scale", "host", N_ROWS);
	plan_case(&p[1], "test_scale", "reference", N_ROWS);
	plan_case(&p[2], "test_scale", "reference", N_ROWS + 1);
	CHECK(run(&r, p, 3, &s) == 0 && r.n == 3);
	if (r.n == 3) {
		json_int_t seed[3];
		for (int i = 0; i < 3; i++) {
			const json_t *c = r.cases[i];
			CHECK_MSG(strcmp(json_string_value(json_object_get(c, "status")), "ok") == 0, "case %d: %s", i,
				json_string_value(json_object_get(c, "error")));
			seed[i] = json_integer_value(json_object_get(json_object_get(c, "correctness"), "input_seed"));
		}
		CHECK(seed[0] == seed[1]);
		CHECK(seed[1] != seed[2]);
		CHECK(r.phases.goodput > 0 && r.phases.correctness > 0 && r.phases.input_generation > 0
			&& r.phases.reference > 0);
	}
	free_results(&r);
}


/* ---- a multi-rank backend over host memory ------------------------------------ */

#define RANKS 2
#define MOVED_BYTES 12345
#define EXACT_ROWS 10

static struct {
	int checks;              /* check_exact calls of the last case */
	int64_t first_rows[4];   /* the first call's sample */
	int64_t first_n;
	bool first_all;
	uint64_t wrong_per_check;
} fake;

struct mb_dev_case {
	const mb_case_plan *plan;
	mb_tensor_spec spec[MB_MAX_TENSORS];
	int n;
	float *t[MB_MAX_TENSORS];
	float *rows;
};

static void fake_whole(const mb_case_plan *plan, mb_case_plan *out)
{
	*out = *plan;
	out->axis[MB_A2A_AX_T] *= plan->axis[MB_A2A_AX_G];
}

static int fake_open(mb_dev_case **out, const mb_case_plan *plan, const mb_tensor_spec *spec, int n,
	mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	mb_dev_case *dc = calloc(1, sizeof(*dc));

	(void)phases, (void)o, (void)err;
	dc->plan = plan;
	dc->n = n;
	memcpy(dc->spec, spec, (size_t)n * sizeof(*spec));
	for (int i = 0; i < n; i++)
		dc->t[i] = calloc((size_t)(spec[i].rows * spec[i].row_elems), sizeof(float));
	dc->rows = calloc((size_t)(spec[n - 1].rows * spec[n - 1].row_elems), sizeof(float));
	fake.checks = 0;
	*out = dc;
	return 0;
}

static int fake_fill(mb_dev_case *dc, int tensor, const mb_input_params *p, mb_outcome *o)
{
	(void)o;
	mb_host_fill(dc->t[tensor], (uint64_t)(dc->spec[tensor].rows * dc->spec[tensor].row_elems), p, dc->plan->dtype);
	return 0;
}

static bool moves_only(const mb_dev_case *dc)
{
	return dc->plan->variant->kind == MB_VARIANT_VENDOR;
}

static int fake_poison(mb_dev_case *dc, mb_outcome *o)
{
	(void)o;
	for (int64_t i = 0; i < dc->spec[2].rows * dc->spec[2].row_elems; i++)
		dc->t[2][i] = NAN;
	return 0;
}

/* y over every rank's rows, rounded to the dtype as a device stores it;
 * a variant that only moves bytes writes none */
static int fake_call(mb_dev_case *dc, mb_outcome *o)
{
	int64_t axis[MB_MAX_AXES];
	const float *in[2] = {dc->t[0], dc->t[1]};
	float *out[1] = {dc->t[2]};

	(void)o;
	if (moves_only(dc))
		return 0;
	memcpy(axis, dc->plan->axis, sizeof(axis));
	dc->plan->row->reference(axis, in, out, NULL, dc->spec[2].rows);
	for (int64_t i = 0; i < dc->spec[2].rows * dc->spec[2].row_elems; i++)
		dc->t[2][i] = mb_dtype_round(dc->plan->dtype, dc->t[2][i]);
	return 0;
}

static int fake_sync(mb_dev_case *dc, mb_outcome *o, mb_error *err)
{
	(void)dc, (void)o, (void)err;
	return 0;
}

static int fake_arm(mb_dev_case *dc, mb_outcome *o)
{
	(void)dc, (void)o;
	return 0;
}

static int fake_time(mb_dev_case *dc, mb_batch *b, mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	(void)phases, (void)err;
	for (int i = 0; i < b->n; i++) {
		fake_call(dc, o);
		b->sample_ns[i] = 1000 + i;
	}
	b->events_ns = b->span_ns = b->launch_ns = NULL;
	b->launches = NULL;
	return 0;
}

static int fake_read(mb_dev_case *dc, int tensor, const int64_t *rows, int64_t n, const float **out, mb_outcome *o)
{
	const int64_t w = dc->spec[tensor].row_elems;

	(void)o;
	for (int64_t i = 0; i < n; i++)
		memcpy(dc->rows + i * w, dc->t[tensor] + (rows ? rows[i] : i) * w, (size_t)w * sizeof(float));
	*out = dc->rows;
	return 0;
}

static int fake_exact(mb_dev_case *dc, const int64_t *rows, int64_t n, mb_exact *out, mb_outcome *o, mb_error *err)
{
	(void)o, (void)err;
	if (fake.checks++ == 0) {
		fake.first_all = rows == NULL;
		fake.first_n = n;
		for (int64_t i = 0; rows && i < n && i < 4; i++)
			fake.first_rows[i] = rows[i];
	}
	out->reference = "every row where the routing sends it";
	out->moves_only = moves_only(dc);
	out->checked += EXACT_ROWS;
	out->wrong += fake.wrong_per_check;
	if (fake.wrong_per_check && !out->first[0])
		snprintf(out->first, sizeof(out->first), "rank 1: row 3 is not where it belongs");
	return 0;
}

static void fake_report(mb_dev_case *dc, mb_dev_report *out)
{
	memset(out, 0, sizeof(*out));
	out->io_bytes = 1;
	out->sample_source = "events";
	out->scratch_bytes = -1;
	out->driver_scratch_bytes = INT64_MIN;
	out->moved_bytes = MOVED_BYTES;
	out->collective = json_pack("{s:i, s:b}", "gpus", RANKS, "moves_only", moves_only(dc));
}

static void fake_close(mb_dev_case *dc)
{
	for (int i = 0; dc && i < dc->n; i++)
		free(dc->t[i]);
	if (dc)
		free(dc->rows);
	free(dc);
}

static const mb_backend FAKE_RANKS = {
	.name = "cuda", .max_batch = 1, .open = fake_open, .fill = fake_fill, .poison = fake_poison, .call = fake_call,
	.sync = fake_sync, .arm = fake_arm, .time_batch = fake_time, .read_rows = fake_read, .report = fake_report,
	.close = fake_close, .whole_case = fake_whole, .check_exact = fake_exact,
};

static void a2a_case(mb_case_plan *p, const char *variant, int64_t t)
{
	const mb_row *row = mb_catalog_find("moe_alltoall");
	int64_t axis[MB_MAX_AXES] = {t, 16, 8, 2, RANKS};
	mb_error err;

	CHECK(row && mb_plan_case(p, row, mb_row_find_variant(row, variant), MB_BF16, MB_MODE_HOT, "ep", axis, "test",
		&err) == 0);
}

static json_t *run_fake(mb_case_plan *p, uint64_t wrong_per_check)
{
	mb_plan plan = {.cases = p, .n_cases = 1};
	results r;
	mb_settings s;
	mb_driver_hooks hooks = {.ctx = &r, .case_done = keep};
	size_t failed_at = 0;
	mb_error err;

	settings_init(&s, 3);
	s.modes[0] = MB_MODE_HOT;
	s.min_samples = s.max_samples = 5;
	memset(&r, 0, sizeof(r));
	fake.wrong_per_check = wrong_per_check;
	CHECK(mb_driver_run(&FAKE_RANKS, &plan, 0, 1, &s, NULL, &hooks, &failed_at, &err) == 0 && r.n == 1);
	return r.n == 1 ? r.cases[0] : json_object();
}

static const char *status_of(const json_t *c)
{
	return json_string_value(json_object_get(c, "status"));
}

static void test_ranks(void)
{
	mb_case_plan p;
	uint64_t seed, row_seed;
	json_t *c, *corr;

	/* the fused variant: y over 2 x 40 rows, 16 of them sampled */
	a2a_case(&p, "fused", 40);
	c = run_fake(&p, 0);
	corr = json_object_get(c, "correctness");
	mb_driver_group_seeds(&p, 3, &seed, &row_seed);
	CHECK_MSG(!strcmp(status_of(c), "ok"), "%s", json_string_value(json_object_get(c, "error")));
	CHECK(json_integer_value(json_object_get(corr, "rows_total")) == RANKS * 40);
	CHECK(json_integer_value(json_object_get(corr, "rows_checked")) == CHECKED);
	CHECK(json_integer_value(json_object_get(corr, "input_seed")) == (json_int_t)seed);
	CHECK(json_is_true(json_object_get(corr, "passed")));
	CHECK(fake.checks == 2 && !fake.first_all && fake.first_n == CHECKED);
	/* the sample spans both ranks' rows: the whole case's, sorted */
	CHECK(fake.first_rows[0] < fake.first_rows[1] && fake.first_rows[3] < RANKS * 40);
	CHECK(json_integer_value(json_object_get(json_object_get(c, "throughput"), "bytes")) == MOVED_BYTES);
	CHECK(json_integer_value(json_object_get(json_object_get(c, "collective"), "gpus")) == RANKS);
	/* 5 timed calls, then the checked one */
	CHECK(json_array_size(json_object_get(json_object_get(c, "timing"), "samples_ns")) == 6);
	json_decref(c);

	/* rows moved wrongly fail the case, though y is right */
	c = run_fake(&p, 1);
	corr = json_object_get(c, "correctness");
	CHECK(!strcmp(status_of(c), "failed") && !json_is_true(json_object_get(corr, "passed")));
	CHECK(json_integer_value(json_object_get(corr, "over_tolerance")) == 0);
	CHECK(strstr(json_string_value(json_object_get(c, "error")), "2 of 20 moved rows"));
	json_decref(c);

	/* a variant that only moves bytes: judged by the exact check alone */
	a2a_case(&p, "nccl_sendrecv", 40);
	c = run_fake(&p, 0);
	corr = json_object_get(c, "correctness");
	CHECK_MSG(!strcmp(status_of(c), "ok"), "%s", json_string_value(json_object_get(c, "error")));
	CHECK(!strcmp(json_string_value(json_object_get(corr, "reference")), "every row where the routing sends it"));
	CHECK(json_integer_value(json_object_get(corr, "rows_checked")) == 2 * EXACT_ROWS);
	CHECK(json_real_value(json_object_get(json_object_get(corr, "tolerance"), "rel")) == 0);
	CHECK(json_integer_value(json_object_get(json_object_get(c, "throughput"), "flops")) == 0);
	json_decref(c);
	c = run_fake(&p, 3);
	corr = json_object_get(c, "correctness");
	CHECK(!strcmp(status_of(c), "failed") && json_integer_value(json_object_get(corr, "over_tolerance")) == 6);
	json_decref(c);
}

int main(void)
{
	test_sample_reproduced();
	test_groups();
	test_ranks();
	return mb_test_finish("test_driver");
}
