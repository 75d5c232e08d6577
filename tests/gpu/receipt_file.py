"""Reading what the GPU runs leave for the scripts beside this one: a
receipt (JSON) or a text file, gzipped or not (as committed under
reports/)."""
import gzip
import json


def open_text(path):
    """A text file, read through gzip where its name ends in .gz."""
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def load(path):
    with open_text(path) as f:
        return json.load(f)
