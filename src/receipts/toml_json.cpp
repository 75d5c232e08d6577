// The project's only C++: toml++ parses, we hand jansson values back to C.
//
// Every entry point catches everything, so no exception ever crosses into C.
// toml++ keeps a table's keys in a sorted std::map; we restore file order by
// sorting on each key's source position, so that objects list keys the way
// the author wrote them and messages walk a file top to bottom.
// error.h and receipt_io.h have no C++ guards of their own; their functions
// have C linkage.
extern "C" {
#include "receipts/error.h"
#include "receipts/read_file.h"
}
#include "receipts/toml_json.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace {

// Name used in messages when a string is parsed without a name.
constexpr const char *unnamed_source = "<string>";

// Thrown inside the converter, caught at the C boundary.
struct bridge_error {
	int code;
	std::string keypath;
	std::string text;
};

bool is_bare_key(const std::string_view key)
{
	if (key.empty())
		return false;
	for (const char c : key) {
		const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			(c >= '0' && c <= '9') || c == '_' || c == '-';
		if (!ok)
			return false;
	}
	return true;
}

// A key as TOML would spell it: bare when it can be, quoted otherwise.
std::string key_segment(const std::string_view key)
{
	if (is_bare_key(key))
		return std::string(key);
	std::string quoted = "\"";
	for (const char c : key) {
		if (c == '"' || c == '\\')
			quoted += '\\';
		quoted += c;
	}
	quoted += '"';
	return quoted;
}

std::string join_key(const std::string &parent, const std::string_view key)
{
	return parent.empty() ? key_segment(key) : parent + "." + key_segment(key);
}

std::string format_date(const toml::date &d)
{
	char buf[32];
	std::snprintf(buf, sizeof(buf), "%04u-%02u-%02u", unsigned(d.year), unsigned(d.month),
		unsigned(d.day));
	return buf;
}

std::string format_time(const toml::time &t)
{
	// Nanoseconds with trailing zeros dropped: 12:00:00.5, not .500000000.
	constexpr unsigned ns_digits = 9;
	char buf[48];
	std::snprintf(buf, sizeof(buf), "%02u:%02u:%02u", unsigned(t.hour), unsigned(t.minute),
		unsigned(t.second));
	std::string out = buf;
	if (t.nanosecond) {
		char frac[16];
		std::snprintf(frac, sizeof(frac), "%0*u", int(ns_digits), unsigned(t.nanosecond));
		std::string f = frac;
		while (!f.empty() && f.back() == '0')
			f.pop_back();
		out += "." + f;
	}
	return out;
}

std::string format_offset(const toml::time_offset &o)
{
	constexpr int minutes_per_hour = 60;
	if (o.minutes == 0)
		return "Z";
	const int total = o.minutes < 0 ? -int(o.minutes) : int(o.minutes);
	char buf[16];
	std::snprintf(buf, sizeof(buf), "%c%02d:%02d", o.minutes < 0 ? '-' : '+',
		total / minutes_per_hour, total % minutes_per_hour);
	return buf;
}

json_t *checked(json_t *value)
{
	if (!value)
		throw std::bad_alloc();
	return value;
}

json_t *convert(const toml::node &node, const std::string &keypath);

json_t *convert_table(const toml::table &table, const std::string &keypath)
{
	std::vector<std::pair<const toml::key *, const toml::node *>> entries;
	for (const auto &[key, value] : table)
		entries.emplace_back(&key, &value);
	std::sort(entries.begin(), entries.end(), [](const auto &a, const auto &b) {
		const auto &pa = a.first->source().begin;
		const auto &pb = b.first->source().begin;
		if (pa.line != pb.line)
			return pa.line < pb.line;
		if (pa.column != pb.column)
			return pa.column < pb.column;
		return a.first->str() < b.first->str();
	});

	json_t *object = checked(json_object());
	try {
		for (const auto &[key, value] : entries) {
			const std::string_view name = key->str();
			const std::string path = join_key(keypath, name);
			if (name.find('\0') != std::string_view::npos)
				throw bridge_error{MB_EINVAL, path, "keys may not contain a NUL character"};
			json_t *child = convert(*value, path);
			if (json_object_setn_new(object, name.data(), name.size(), child))
				throw std::bad_alloc();
		}
	} catch (...) {
		json_decref(object);
		throw;
	}
	return object;
}

json_t *convert_array(const toml::array &array, const std::string &keypath)
{
	json_t *out = checked(json_array());
	try {
		size_t index = 0;
		for (const toml::node &item : array) {
			const std::string path = keypath + "[" + std::to_string(index++) + "]";
			if (json_array_append_new(out, convert(item, path)))
				throw std::bad_alloc();
		}
	} catch (...) {
		json_decref(out);
		throw;
	}
	return out;
}

json_t *convert_float(double value, const std::string &keypath)
{
	// JSON has no NaN or infinity, and a schema could not judge one anyway.
	if (!std::isfinite(value)) {
		const char *got = std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
		throw bridge_error{MB_EINVAL, keypath,
			std::string("expected a finite number, got ") + got};
	}
	return checked(json_real(value));
}

json_t *convert_string(const std::string &s, const std::string &keypath)
{
	json_t *out = json_stringn(s.data(), s.size());
	if (!out)
		throw bridge_error{MB_EINVAL, keypath, "string is not valid UTF-8"};
	return out;
}

json_t *convert(const toml::node &node, const std::string &keypath)
{
	switch (node.type()) {
	case toml::node_type::table:
		return convert_table(*node.as_table(), keypath);
	case toml::node_type::array:
		return convert_array(*node.as_array(), keypath);
	case toml::node_type::string:
		return convert_string(node.as_string()->get(), keypath);
	case toml::node_type::integer:
		return checked(json_integer(json_int_t(node.as_integer()->get())));
	case toml::node_type::floating_point:
		return convert_float(node.as_floating_point()->get(), keypath);
	case toml::node_type::boolean:
		return checked(json_boolean(node.as_boolean()->get()));
	case toml::node_type::date:
		return checked(json_string(format_date(node.as_date()->get()).c_str()));
	case toml::node_type::time:
		return checked(json_string(format_time(node.as_time()->get()).c_str()));
	case toml::node_type::date_time: {
		const toml::date_time &dt = node.as_date_time()->get();
		std::string s = format_date(dt.date) + "T" + format_time(dt.time);
		if (dt.offset)
			s += format_offset(*dt.offset);
		return checked(json_string(s.c_str()));
	}
	case toml::node_type::none:
		break;
	}
	throw bridge_error{MB_EINVAL, keypath, "value of unknown TOML type"};
}

int parse_text(json_t **out, std::string_view text, const char *name, mb_error *err)
{
	*out = nullptr;
	try {
		toml::table table = toml::parse(text, std::string_view(name));
		*out = convert_table(table, "");
		return 0;
	} catch (const toml::parse_error &e) {
		const toml::source_position &pos = e.source().begin;
		char where[MB_ERROR_WHERE_MAX];
		std::snprintf(where, sizeof(where), "%s:%u:%u", name, unsigned(pos.line),
			unsigned(pos.column));
		return mb_error_set(err, MB_EINVAL, where, "%.*s", int(e.description().size()),
			e.description().data());
	} catch (const bridge_error &e) {
		const std::string where = e.keypath.empty() ? std::string(name)
			: std::string(name) + ": " + e.keypath;
		return mb_error_set(err, e.code, where.c_str(), "%s", e.text.c_str());
	} catch (const std::bad_alloc &) {
		return mb_error_set(err, MB_ENOMEM, name, "out of memory while parsing TOML");
	} catch (const std::exception &e) {
		return mb_error_set(err, MB_EINVAL, name, "%s", e.what());
	} catch (...) {
		return mb_error_set(err, MB_EINVAL, name, "unexpected failure while parsing TOML");
	}
}

} // namespace

extern "C" int mb_toml_parse_file(json_t **out, const char *path, size_t max_bytes, const char *what,
	mb_error *err)
{
	char *text = nullptr;
	size_t len = 0;
	int rc;

	*out = nullptr;
	rc = mb_read_file(&text, &len, path, max_bytes, what, err);
	if (!rc && std::strlen(text) != len)
		rc = mb_error_set(err, MB_EINVAL, path, "contains a NUL byte at offset %zu; a TOML file is text",
			std::strlen(text));
	if (!rc)
		rc = parse_text(out, std::string_view(text, len), path, err);
	std::free(text);
	return rc;
}

extern "C" int mb_toml_parse_string(json_t **out, const char *text, const char *name,
	mb_error *err)
{
	*out = nullptr;
	if (!text)
		return mb_error_set(err, MB_EINVAL, name ? name : unnamed_source, "no TOML text given");
	return parse_text(out, std::string_view(text), name ? name : unnamed_source, err);
}
