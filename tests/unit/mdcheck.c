/* Markdown as print_markdown.c writes it, checked: shared by
 * test_markdown_escape and the fuzz targets (tests/fuzz). */
#include "mdcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *mdcheck_without_code_spans(const char *md)
{
	char *copy = strdup(md);
	size_t i = 0, n, j, m;

	while (copy && copy[i]) {
		if (copy[i] != '`' || (i && copy[i - 1] == '\\')) {
			i++;
			continue;
		}
		for (n = 0; copy[i + n] == '`'; n++)
			;
		for (j = i + n; copy[j]; j += m ? m : 1) {
			for (m = 0; copy[j + m] == '`'; m++)
				;
			if (m == n)
				break;
		}
		if (!copy[j]) {
			i += n;
			continue;
		}
		memset(copy + i + n, ' ', j - i - n);
		i = j + n;
	}
	return copy;
}

/* Unescaped pipes: those not after an odd run of backslashes. */
static size_t cell_borders(const char *line, size_t len)
{
	size_t i, n = 0, backslashes = 0;

	for (i = 0; i < len; i++) {
		if (line[i] == '|' && backslashes % 2 == 0)
			n++;
		backslashes = line[i] == '\\' ? backslashes + 1 : 0;
	}
	return n;
}

static bool printer_tag(const char *at)
{
	static const char *const tags[] = { "<details>", "</details>", "<summary>", "</summary>" };
	size_t i;

	for (i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
		if (!strncmp(at, tags[i], strlen(tags[i])))
			return true;
	return false;
}

const char *mdcheck_violation(const char *md_text)
{
	static char why[256];
	char *md = mdcheck_without_code_spans(md_text);
	const char *line, *end, *at, *found = NULL;
	size_t header = 0, borders, len;
	bool in_table = false;

	if (!md)
		return NULL;
	for (line = md; *line && !found; line = *end ? end + 1 : end) {
		end = strchr(line, '\n');
		if (!end)
			end = line + strlen(line);
		len = (size_t)(end - line);
		if (len && line[0] == '|') {
			borders = cell_borders(line, len);
			if (!in_table)
				header = borders;
			if (borders != header) {
				snprintf(why, sizeof(why), "a table row has %zu cell borders, its header %zu: %.120s", borders,
					header, line);
				found = why;
			}
			in_table = true;
		} else {
			in_table = false;
		}
	}
	for (at = strchr(md, '<'); at && !found; at = strchr(at + 1, '<'))
		if (!printer_tag(at)) {
			snprintf(why, sizeof(why), "raw HTML: %.60s", at);
			found = why;
		}
	if (!found && (at = strstr(md, "](")) != NULL) {
		snprintf(why, sizeof(why), "an inline link or image: %.60s", at);
		found = why;
	}
	free(md);
	return found;
}
