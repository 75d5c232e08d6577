"""Reading what the GPU runs leave for the scripts beside this one: a
receipt (JSON) or a text file, gzipped or not (as committed under
reports/)."""
import gzip
import json


def open_text(path, newline=None):
    """A text file, read through gzip where its name ends in .gz (newline
    as open's: the csv module wants "")."""
    if path.endswith(".gz"):
        return gzip.open(path, "rt", newline=newline)
    return open(path, newline=newline)


def load(path):
    with open_text(path) as f:
        return json.load(f)
