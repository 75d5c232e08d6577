/* The case object of a receipt; see case_record.h. */
#include "harness/case_record.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

json_t *mb_case_json_new(const mb_case_plan *plan, const char *backend)
{
	json_t *c = json_object(), *shape = json_object(), *mem = json_object();
	char block[2] = {plan->row->block, '\0'};

	for (int i = 0; i < plan->row->n_axes; i++)
		json_object_set_new(shape, plan->row->axes[i], json_integer(plan->axis[i]));
	json_object_set_new(mem, "io_bytes", json_integer(0));
	json_object_set_new(c, "id", json_string(plan->id));
	json_object_set_new(c, "row", json_string(plan->row->name));
	json_object_set_new(c, "block", json_string(block));
	json_object_set_new(c, "variant", json_string(plan->variant->name));
	json_object_set_new(c, "variant_kind", json_string(mb_variant_kind_name(plan->variant->kind)));
	json_object_set_new(c, "backend", json_string(backend));
	json_object_set_new(c, "dtype", json_string(mb_dtype_name(plan->dtype)));
	json_object_set_new(c, "mode", json_string(mb_mode_name(plan->mode)));
	json_object_set_new(c, "family", json_string(plan->family));
	json_object_set_new(c, "shape", shape);
	json_object_set_new(c, "weight", json_real(plan->weight));
	json_object_set_new(c, "weight_source", json_string(plan->weight_given ? "suite" : "default"));
	json_object_set_new(c, "status", json_string("ok"));
	json_object_set_new(c, "error", json_null());
	json_object_set_new(c, "correctness", json_null());
	json_object_set_new(c, "timing", json_null());
	json_object_set_new(c, "throughput", json_null());
	json_object_set_new(c, "memory", mem);
	json_object_set_new(c, "findings", json_array());
	return c;
}

void mb_case_json_set_status(json_t *c, const char *status, const char *error)
{
	json_object_set_new(c, "status", json_string(status));
	json_object_set_new(c, "error", error && strcmp(status, "ok") != 0 ? json_string(error) : json_null());
}

void mb_case_json_add_finding(json_t *c, const char *kind, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *f = json_object();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_set_new(f, "kind", json_string(kind));
	json_object_set_new(f, "message", json_string(msg));
	json_array_append_new(json_object_get(c, "findings"), f);
}
