/* Checks of Markdown as print_markdown.c writes it, for the tests that
 * feed it hostile receipt text (test_markdown_escape, tests/fuzz). */
#ifndef MB_TESTS_MDCHECK_H
#define MB_TESTS_MDCHECK_H

#include <stdbool.h>

/* A copy of `md` (to free) with the inside of every code span blanked out:
 * a run of n unescaped backticks up to the next run of exactly n. Nothing
 * there is markup. */
char *mdcheck_without_code_spans(const char *md);

/* Every row of a table has as many unescaped cell borders as its header,
 * and outside code spans there is no HTML but the printer's own <details>
 * and <summary>, and no inline link or image. A description of the first
 * violation (static storage), or NULL. */
const char *mdcheck_violation(const char *md);

#endif
