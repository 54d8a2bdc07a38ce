"""Tools whose output can be the ground truth itself, kept out of training unless asked for.

A module of constants only, so that CLI help can name them without loading the tool registry.
"""

ANSWER_READING = frozenset({"exif_gps"})
EXIF_HELP = (
    "also offer exif_gps, which reads the photo's own GPS tag: on photos that keep their EXIF "
    "the policy learns to read the answer instead of locating, so it is off unless you are "
    "sure the images carry no GPS tags"
)
