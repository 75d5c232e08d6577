/* megabench catalog and megabench version. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "mb_config.h"
#include "harness/cli.h"
#include "kernels/catalog.h"
#include "receipts/schema.h"

static void catalog_usage(FILE *f)
{
	fprintf(f,
		"usage: megabench catalog [--format table|json] [--all] [ROW...]\n"
		"\n"
		"Lists every catalog row, or the ROWs named (exit 2 naming the known rows for one\n"
		"that is not in the catalog): block family (A attention, M state space, E expert,\n"
		"R recurrent, X cross-cutting), status, what the fused kernel trades for\n"
		"(time, memory or both: what its verdict weighs), variants (a '*' marks one\n"
		"built into this binary), and the tolerance applied per dtype with its\n"
		"rationale.\n"
		"--all includes the test-only rows, which exist only in test builds\n"
		"(megabench-test, or megabench built with -Dtest_rows=true); elsewhere it\n"
		"lists the same rows as without it. JSON output follows\n"
		"schemas/catalog.schema.json.\n");
}

static json_t *tolerance_json(const mb_tolerance *t)
{
	return json_pack("{s:f, s:f, s:s}", "abs", t->abs, "rel", t->rel, "rationale", t->rationale);
}

static bool variant_available(const mb_variant *v)
{
	return v->kind == MB_VARIANT_REFERENCE || v->launch != NULL;
}

static json_t *row_json(const mb_row *row)
{
	json_t *axes = json_array(), *variants = json_array(), *sources = json_array(), *tols = json_object();
	char block[2] = {row->block, '\0'};

	for (int i = 0; i < row->n_axes; i++)
		json_array_append_new(axes, json_string(row->axes[i]));
	for (int i = 0; i < 4 && row->source_files[i]; i++)
		json_array_append_new(sources, json_string(row->source_files[i]));
	for (int d = 0; d < MB_DTYPE_COUNT; d++)
		json_object_set_new(tols, mb_dtype_name((mb_dtype)d), tolerance_json(&row->tolerance[d]));
	for (int i = 0; i < row->n_variants; i++) {
		const mb_variant *v = &row->variants[i];
		json_t *dtypes = json_array(), *kernels = json_array();
		for (int d = 0; d < MB_DTYPE_COUNT; d++) {
			if (v->dtype_mask & (1u << d))
				json_array_append_new(dtypes, json_string(mb_dtype_name((mb_dtype)d)));
		}
		for (int k = 0; k < MB_MAX_KERNEL_PATTERNS && v->kernel_patterns[k]; k++)
			json_array_append_new(kernels, json_string(v->kernel_patterns[k]));
		json_array_append_new(variants, json_pack("{s:s, s:s, s:s, s:s, s:b, s:o, s:i, s:o, s:b, s:b}",
			"name", v->name, "kind", mb_variant_kind_name(v->kind), "backend", v->backend,
			"description", v->description, "available", variant_available(v), "dtypes", dtypes,
			"launches_per_call", v->launches_per_call, "kernels", kernels,
			"library_kernels", v->library_kernels, "syncs_host", v->syncs_host));
	}
	json_t *out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o, s:o, s:i}", "name", row->name,
		"block", block, "status", mb_row_status_name(row->status), "trades", mb_row_trades_name(row->trades),
		"summary", row->summary, "axes", axes,
		"reference", row->reference_name, "tolerances", tols, "variants", variants, "sources", sources,
		"min_gpus", row->min_gpus > 1 ? row->min_gpus : 1);

	if (out && row->condition)
		json_object_set_new(out, "condition", json_string(row->condition));
	return out;
}

/* The row called `name` among `rows`, or NULL. */
static const mb_row *find_row(const mb_row *const *rows, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i]->name, name))
			return rows[i];
	return NULL;
}

static void print_table(const mb_row *const *rows, size_t n)
{
	for (size_t r = 0; r < n; r++) {
		const mb_row *row = rows[r];
		printf("%s  [%c] %s%s%s%s, trades for %s\n  %s\n  axes:", row->name, row->block,
			mb_row_status_name(row->status), row->condition ? " (" : "", row->condition ? row->condition : "",
			row->condition ? ")" : "", mb_row_trades_name(row->trades), row->summary);
		for (int i = 0; i < row->n_axes; i++)
			printf(" %s", row->axes[i]);
		if (row->min_gpus > 1)
			printf("\n  runs across %d or more GPUs, under `megabench alltoall`", row->min_gpus);
		printf("\n  variants:");
		for (int i = 0; i < row->n_variants; i++)
			printf(" %s%s (%s, %s)", row->variants[i].name, variant_available(&row->variants[i]) ? "*" : "",
				mb_variant_kind_name(row->variants[i].kind), row->variants[i].backend);
		printf("\n  tolerance (|got - want| <= abs + rel * |want|):\n");
		for (int d = 0; d < MB_DTYPE_COUNT; d++) {
			const mb_tolerance *t = &row->tolerance[d];
			printf("    %-4s abs %.3g rel %.3g  %s\n", mb_dtype_name((mb_dtype)d), t->abs, t->rel, t->rationale);
		}
		printf("\n");
	}
	printf("%zu row%s; * = built into this binary\n", n, n == 1 ? "" : "s");
}

int mb_cli_catalog(int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"all", no_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *format = "table";
	bool all = false;
	size_t n, n_named = 0;
	const mb_row *const *rows;
	const mb_row **named = NULL;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:ah", opts, NULL)) != -1) {
		switch (c) {
		case 'f': format = optarg; break;
		case 'a': all = true; break;
		case 'h': catalog_usage(stdout); return MB_EXIT_OK;
		default: return mb_cli_usage_error("catalog", "unknown or incomplete option");
		}
	}
	if (strcmp(format, "table") && strcmp(format, "json"))
		return mb_cli_usage_error("catalog", "--format must be table or json, got \"%s\"", format);
	rows = all ? mb_catalog_rows_all(&n) : mb_catalog_rows(&n);
	if (optind < argc) {
		named = calloc((size_t)(argc - optind), sizeof(*named));
		if (!named) {
			fprintf(stderr, "megabench: catalog: out of memory\n");
			return MB_EXIT_INPUT;
		}
		for (int i = optind; i < argc; i++) {
			const mb_row *row = find_row(rows, n, argv[i]);
			char known[MB_ERROR_TEXT_MAX / 2];
			mb_error err;

			if (!row) {
				mb_catalog_names(known, sizeof(known));
				mb_error_set(&err, MB_ENOTFOUND, argv[i], "no such row in the catalog%s; known rows: %s",
					all ? "" : " (test-only rows need --all in a test build)", known);
				mb_cli_error(&err);
				free(named);
				return MB_EXIT_INPUT;
			}
			named[n_named++] = row;
		}
		rows = named;
		n = n_named;
	}
	if (strcmp(format, "table") == 0) {
		print_table(rows, n);
	} else if (strcmp(format, "json") == 0) {
		json_t *list = json_array(), *doc;
		for (size_t i = 0; i < n; i++)
			json_array_append_new(list, row_json(rows[i]));
		doc = json_pack("{s:s, s:i, s:o}", "kind", "megabench.catalog", "schema_version", 1, "rows", list);
		json_dumpf(doc, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(doc);
	}
	free(named);
	return MB_EXIT_OK;
}

static void version_usage(FILE *f)
{
	fprintf(f, "usage: megabench version\n"
		"Print megabench's version, the compilers and build type, and the features built in\n"
		"(CUDA, CUPTI, NCCL, cuBLAS; with CUDA, the compiler and the SM architectures).\n"
		"Also 'megabench --version'. Exit 0; 64 usage error.\n");
}

int mb_cli_version(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		version_usage(stdout);
		return MB_EXIT_OK;
	}
	if (argc > 1)
		return mb_cli_usage_error("version", "unexpected argument \"%s\"", argv[1]);
	printf("megabench %s\n", MB_VERSION);
	printf("built with %s, %s (%s)\n", MB_C_COMPILER, MB_CXX_COMPILER, MB_BUILDTYPE);
	printf("features: cuda %s, cupti %s, nccl %s, cublas %s\n", MB_HAVE_CUDA ? "yes" : "no",
		MB_HAVE_CUPTI ? "yes" : "no", MB_HAVE_NCCL ? "yes" : "no", MB_HAVE_CUBLAS ? "yes" : "no");
#if MB_HAVE_CUDA
	printf("cuda compiler: %s, architectures: %s\n", MB_CUDA_COMPILER, MB_CUDA_ARCHS);
#endif
	return MB_EXIT_OK;
}
