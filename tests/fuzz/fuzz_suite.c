/* The suite loader as `megabench run` and `validate` use it: TOML bytes
 * through mb_suite_load (parse, schema, catalog and shape checks) and, for a
 * suite it accepts, the plan of cases on the CPU backend, as --dry-run
 * makes it. A suite it accepts names no string that stops at a NUL. */
#include <git2.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "harness/suite.h"

/* mb_suite_load hashes the file with libgit2, which it initialises and
 * shuts down each time: a full start-up of its TLS backend per input. One
 * initialisation held for the whole run makes each of theirs a count. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	git_libgit2_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_memfile(data, size, path, sizeof(path));
	json_t *rows = NULL, *dtypes = NULL, *variants = NULL;
	mb_plan_filter filter = { NULL, NULL, NULL, NULL };
	const json_t *name;
	mb_suite *suite = NULL;
	mb_plan *plan = NULL;
	mb_error err;

	if (fd < 0)
		return 0;
	mb_error_clear(&err);
	if (mb_suite_load(&suite, path, &err) == 0) {
		name = json_object_get(json_object_get(suite->doc, "suite"), "name");
		fuzz_require(strlen(suite->name) == json_string_length(name), "an accepted suite name holds no NUL");
		if (mb_plan_build(&plan, suite, &filter, "cpu", &err) == 0)
			fuzz_require(plan->n_cases > 0, "a plan has cases");
		if (mb_plan_filters_json(&rows, &dtypes, &variants, suite, &filter, &err) == 0) {
			json_decref(rows);
			json_decref(dtypes);
			json_decref(variants);
		}
	}
	mb_plan_free(plan);
	mb_suite_free(suite);
	close(fd);
	return 0;
}
