/* What case_common.h held now lives in files by subject; this header
 * only includes them until its users name the ones they use. */
#ifndef MB_HARNESS_CASE_COMMON_H
#define MB_HARNESS_CASE_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "receipts/error.h"
#include "harness/case_record.h"
#include "harness/check.h"
#include "harness/clock.h"
#include "harness/host_inputs.h"
#include "harness/rng.h"
#include "harness/sampler.h"
#include "harness/suite.h"
#include "harness/throughput.h"
#include "kernels/catalog.h"

#endif
