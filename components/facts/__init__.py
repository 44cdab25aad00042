"""Facts as data: tables read from upstream sources, each row or table naming where it comes from.

The GPU catalog (`catalog`), how capacity can be had per family (`capacity`), Helm chart pins
(`charts`), regions and zones (`regions`), the clouds' documented limits (`limits`), reference
prices (`prices`), AWS facts the wing builds from (`aws`) and the catalog of policy rules
(`rule_catalog`). Bump a pin or a price here and nowhere else.

Imports: nothing of ours but other modules of this folder.
"""
