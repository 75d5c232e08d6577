#!/usr/bin/env python3
"""What a build compiles, for the receipts its executables write: the commit,
dirty flag and describe of the source tree, and the git blob id of every
source file (the bytes compiled), as the C definition of mb_build_embedded
(src/receipts/provenance.h).

usage: embed_provenance.py SOURCE_ROOT OUT.c

Meson runs it on every build (build_always_stale). OUT.c is rewritten only
when its text changes, and meson's rule for custom commands has ninja
`restat`, so an unchanged tree recompiles and relinks nothing. Without git,
or outside a checkout of its own (a tarball unpacked anywhere, even inside
another repository), the commit is unknown and the blob ids are still
computed from the bytes.
"""
import hashlib
import os
import subprocess
import sys

# Which files go into the executables: TOPS are paths under the root (a
# trailing '/' walks the folder, hidden names left out), PATTERNS the file
# names taken there ('*' a suffix). The C side reads the same rule back from
# the generated data to find files a checkout added.
TOPS = ["meson.build", "meson_options.txt", "schemas/", "src/"]
PATTERNS = ["*.c", "*.h", "*.cu", "*.cuh", "*.cpp", "*.def", "*.json", "*.py", "meson.build"]


def blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def matches(name):
    return any(name.endswith(p[1:]) if p.startswith("*") else name == p for p in PATTERNS)


def in_rule(path):
    """Whether the rule takes `path` (relative to the root, '/'-separated)."""
    parts = path.split("/")
    if any(x.startswith(".") for x in parts):
        return False
    return path in TOPS or (matches(parts[-1]) and any(path.startswith(t) for t in TOPS if t.endswith("/")))


def source_paths(root):
    """Every path the rule takes, relative to root, sorted as C's strcmp sorts."""
    out = []
    for top in TOPS:
        full = os.path.join(root, top)
        if not top.endswith("/"):
            if os.path.isfile(full):
                out.append(top)
            continue
        # symbolic links to folders are not followed, to files they are
        for d, dirs, files in os.walk(full):
            dirs[:] = [x for x in dirs if not x.startswith(".")]
            rel = os.path.relpath(d, root).replace(os.sep, "/")
            out += [rel + "/" + f for f in files
                    if in_rule(rel + "/" + f) and os.path.isfile(os.path.join(d, f))]
    return sorted(set(out), key=lambda p: p.encode(errors="surrogateescape"))


def git(root, *args, stdin=None):
    """git's stdout (bytes), or None when git is missing or fails. GIT_*
    variables are dropped so that only the directory decides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        r = subprocess.run(["git", "-C", root] + list(args), input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env, check=False)
    except OSError:
        return None
    return r.stdout if r.returncode == 0 else None


def head_state(root, paths, raw_ids):
    """(facts, reason): facts of HEAD and which sources differ from it, or
    None and why the commit is unknown."""
    top = git(root, "rev-parse", "--show-toplevel")
    if top is None:
        return None, "built outside a git checkout: %s (or git is not installed)" % root
    top = top.decode(errors="replace").strip()
    if os.path.realpath(top) != os.path.realpath(root):
        return None, "built from %s, which is not a git checkout of its own (it lies inside %s)" % (root, top)
    commit = git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if commit is None:
        return None, "the git repository at %s has no commits" % root
    commit = commit.decode().strip()
    when = git(root, "show", "-s", "--format=%ct", commit)
    branch = git(root, "symbolic-ref", "-q", "--short", "HEAD")
    describe = git(root, "describe", "--always", "--tags", commit)
    listing = git(root, "ls-tree", "-r", "-z", "--full-tree", commit)
    # the repository's filters apply, as git itself asks whether a file is
    # modified (a CRLF checkout of an LF blob is clean)
    filtered = git(root, "hash-object", "--stdin-paths", stdin="".join(p + "\n" for p in paths).encode())
    if None in (when, describe, listing, filtered):
        return None, "git could not describe HEAD of %s" % root
    in_head = {}
    for entry in listing.split(b"\0"):
        if b"\t" in entry:
            meta, path = entry.split(b"\t", 1)
            in_head[path.decode(errors="surrogateescape")] = meta.split()[2].decode()
    filtered = filtered.decode().split()
    modified = [in_head.get(p) not in (f, r) for p, f, r in zip(paths, filtered, raw_ids)]
    taken = set(paths)
    # a file of the rule deleted since HEAD: the tree is not the commit
    deleted = any(p not in taken and in_rule(p) for p in in_head)
    dirty = any(modified) or deleted
    return {
        "commit": commit, "commit_time": int(when.decode().strip()),
        "branch": branch.decode(errors="replace").strip() if branch else None,
        "dirty": dirty, "describe": describe.decode(errors="replace").strip() + ("-dirty" if dirty else ""),
        "modified": modified,
    }, None


def c_string(s):
    """A C string literal of any text: bytes outside printable ASCII, quotes
    and backslashes as octal escapes."""
    if s is None:
        return "NULL"
    data = s.encode(errors="surrogateescape") if isinstance(s, str) else s
    return '"' + "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C, 0x3F) else "\\%03o" % b
                         for b in data) + '"'


def render(root, paths, raw_ids, facts, reason):
    lines = ["/* Generated by src/receipts/embed_provenance.py at build time: do not edit. */",
             '#include "receipts/provenance.h"', "", "static const mb_source_id sources[] = {"]
    for i, (p, b) in enumerate(zip(paths, raw_ids)):
        modified = facts["modified"][i] if facts else False
        lines.append("\t{%s, %s, %s}," % (c_string(p), c_string(b), "true" if modified else "false"))
    lines += ["};", "", "static const char *const tops[] = {%s};" % ", ".join(map(c_string, TOPS)),
              "static const char *const patterns[] = {%s};" % ", ".join(map(c_string, PATTERNS)), "",
              "const mb_build_provenance mb_build_embedded = {",
              "\t.workdir = %s," % c_string(root),
              "\t.commit = %s," % c_string(facts["commit"] if facts else None),
              "\t.commit_time = %d," % (facts["commit_time"] if facts else 0),
              "\t.branch = %s," % c_string(facts["branch"] if facts else None),
              "\t.dirty = %s," % ("true" if facts and facts["dirty"] else "false"),
              "\t.describe = %s," % c_string(facts["describe"] if facts else None),
              "\t.reason = %s," % c_string(reason),
              "\t.sources = sources,",
              "\t.n_sources = sizeof(sources) / sizeof(sources[0]),",
              "\t.tops = tops,",
              "\t.n_tops = sizeof(tops) / sizeof(tops[0]),",
              "\t.patterns = patterns,",
              "\t.n_patterns = sizeof(patterns) / sizeof(patterns[0]),",
              "};", ""]
    return "\n".join(lines)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: embed_provenance.py SOURCE_ROOT OUT.c")
    root, out = os.path.realpath(sys.argv[1]), sys.argv[2]
    paths = source_paths(root)
    raw_ids = []
    for p in paths:
        with open(os.path.join(root, p), "rb") as f:
            raw_ids.append(blob_id(f.read()))
    facts, reason = head_state(root, paths, raw_ids)
    text = render(root, paths, raw_ids, facts, reason)
    try:
        with open(out, encoding="utf-8", errors="surrogateescape") as f:
            if f.read() == text:
                return  # unchanged: ninja's restat leaves its dependents alone
    except OSError:
        pass
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
