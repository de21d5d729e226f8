"""The policies a method is made of: where a layer's halo rows come from (``halo``: exact and
none; ``store``: DIGEST's stale representation store; ``compress``: VARCO's compressors and ratio
schedule) and how parameters are kept in sync (``params``: gradient all-reduce or averaging every
K steps). Exact and DIGEST register themselves beside their policies."""
