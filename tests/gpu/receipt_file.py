"""Reading a receipt for the scripts beside this one: a JSON file, gzipped
or not (as committed under reports/)."""
import gzip
import json


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)
