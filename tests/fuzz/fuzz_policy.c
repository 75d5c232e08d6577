/* The policy loader (`--policy policy.toml` of diff and gate): TOML bytes
 * through mb_policy_load, then what diff does with an accepted policy:
 * its JSON form, its description, per-row look-ups. Accepted thresholds
 * are finite. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "receipts/policy.h"

#define DESCRIBE_BYTES 2048

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], text[DESCRIBE_BYTES];
	int fd = fuzz_memfile(data, size, path, sizeof(path));
	mb_policy policy;
	mb_error err;
	json_t *doc;
	char *dumped;
	size_t i;

	if (fd < 0)
		return 0;
	mb_error_clear(&err);
	if (mb_policy_load(&policy, path, &err) == 0) {
		fuzz_require(isfinite(policy.t.alpha) && isfinite(policy.t.min_effect) && isfinite(policy.t.noise_floor),
			"accepted thresholds are finite");
		doc = mb_policy_to_json(&policy);
		dumped = json_dumps(doc, JSON_COMPACT);
		free(dumped);
		json_decref(doc);
		mb_policy_describe_changes(&policy, text, sizeof(text));
		for (i = 0; i < policy.n_rows; i++)
			fuzz_require(mb_policy_for_row(&policy, policy.rows[i].name) == &policy.rows[i].t,
				"a row finds its own thresholds");
		(void)mb_policy_for_row(&policy, "no_such_row");
	}
	mb_policy_free(&policy);
	close(fd);
	return 0;
}
