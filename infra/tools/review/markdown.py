"""The review as Markdown: a section per stack with its tables, replacement warnings, policy results
and a Mermaid diagram of its components. Everything sorted, so identical inputs give identical text."""

from __future__ import annotations

import json
from typing import Any

from components.checks.rules import base
from components.facts import catalog
from components.facts.rule_catalog import RULES
from components.spec import CONFIG_KEY, CONFIG_NAMESPACE
from infra.tools.review.diff import ABSENT, Change, StackReview, capacity, pool_capacity, records_by_key

_MAX_VALUE = 100


def _value(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > _MAX_VALUE:
        text = text[: _MAX_VALUE - 1] + "…"
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _delta_int(before: int, after: int) -> str:
    if before == after:
        return str(after)
    return f"{before} → {after} ({after - before:+d})"


def _delta_usd(before: float | None, after: float | None) -> str:
    if before == after:
        return _usd(after)
    if before is None or after is None:
        return f"{_usd(before)} → {_usd(after)}"
    return f"{_usd(before)} → {_usd(after)} ({after - before:+,.2f})"


def _policy_cell(findings: list[base.Finding]) -> str:
    counts = {level: sum(1 for f in findings if f.level == level) for level in ("mandatory", "advisory", "overridden")}
    parts = [f"{n} {level}" for level, n in counts.items() if n]
    return ", ".join(parts) if parts else "pass"


def _changes_table(changes: list[Change], replacing: set[str] | None = None, header: str = "property") -> list[str]:
    lines = [f"| {header} | before | after |", "|---|---|---|"]
    for c in changes:
        mark = " ⚠️ replaces" if replacing and c.path in replacing else ""
        lines.append(f"| `{c.path}`{mark} | {_value(c.before)} | {_value(c.after)} |")
    return lines


def _pool_rows(review: StackReview) -> list[str]:
    old = {p["name"]: p for p in (review.base or {}).get("pools", [])}
    new = {p["name"]: p for p in (review.head or {}).get("pools", [])}
    lines = [
        "| pool | change | GPU | nodes | max GPUs | $/h min | $/h max |",
        "|---|---|---|---|---|---|---|",
    ]
    for change in review.pools:
        before, after = old.get(change.name), new.get(change.name)
        shown = after or before or {}
        what = change.status if change.status != "changed" else ", ".join(
            f"{c.path} {_plain(c.before)} → {_plain(c.after)}" for c in change.changes
        )
        nodes_before = f"{before['minNodes']}-{before['maxNodes']}" if before else "-"
        nodes_after = f"{after['minNodes']}-{after['maxNodes']}" if after else "-"
        nodes = nodes_after if nodes_before == nodes_after else f"{nodes_before} → {nodes_after}"
        cb, ca = pool_capacity(before), pool_capacity(after)
        lines.append(
            f"| `{change.name}` | {what} | {shown.get('gpu', '')} | {nodes} | {_delta_int(cb.max_gpus, ca.max_gpus)}"
            f" | {_delta_usd(cb.usd_min, ca.usd_min)} | {_delta_usd(cb.usd_max, ca.usd_max)} |"
        )
    tb, ta = capacity(list(old.values())), capacity(list(new.values()))
    lines.append(
        f"| **stack total** | | | | {_delta_int(tb.max_gpus, ta.max_gpus)} | {_delta_usd(tb.usd_min, ta.usd_min)}"
        f" | {_delta_usd(tb.usd_max, ta.usd_max)} |"
    )
    return lines


def _plain(value: Any) -> str:
    return "(absent)" if value is ABSENT else str(value)


def _replacement_lines(review: StackReview) -> list[str]:
    lines = []
    covered = {r.key for p in review.pools if p.replacing and (r := review.pool_resource(p.name))}
    for change in review.changed:
        if change.replacing and change.key not in covered:
            paths = ", ".join(f"`{p}`" for p in change.replacing)
            lines.append(f"> - `{change.key}` is **replaced** (deleted and created again): {paths} changed")
    for pool in review.pools:
        if pool.replacing:
            fields = ", ".join(
                f"`{c.path}` {_plain(c.before)} → {_plain(c.after)}" for c in pool.changes if c.path in pool.replacing
            )
            resource = review.pool_resource(pool.name)
            held_by = f" (`{resource.key}`)" if resource else ""
            lines.append(
                f"> - pool `{pool.name}`: {fields} replaces the pool's node group / node pool{held_by}:"
                " its nodes are recreated and running pods evicted"
            )
    return ["> [!WARNING]", "> **Replacements**", *lines] if lines else []


def mermaid(review: StackReview) -> list[str]:
    """The components of the working tree's stack (the base's if the stack is removed) as a graph;
    components with added, removed or changed resources below them are highlighted."""
    source = review.head if review.head is not None else review.base or {}
    records = source.get("resources", [])
    by_key = records_by_key(records)
    base_by_key = records_by_key((review.base or {}).get("resources", []))
    components = sorted(k for k, r in by_key.items() if not r["custom"])
    ids = {key: f"c{i}" for i, key in enumerate(components)}

    def owner(key: str, table: dict[str, dict[str, Any]]) -> str | None:
        parent = table[key]["parent"] if key in table else None
        while parent is not None and parent in table and table[parent]["custom"]:
            parent = table[parent]["parent"]
        return parent if parent in ids else None

    counts: dict[str | None, int] = {}
    for key, record in by_key.items():
        if record["custom"]:
            at = owner(key, by_key)
            counts[at] = counts.get(at, 0) + 1
    touched_keys = [*review.added, *(c.key for c in review.changed)]
    touched: set[str] = set()
    for key in touched_keys:
        _mark_ancestors(key, by_key, ids, touched)
    for key in review.removed:
        _mark_ancestors(key, base_by_key, ids, touched)
    lines = ["```mermaid", "graph TD", f'  stack["{review.stack} ({counts.get(None, 0)} resources)"]']
    for key in components:
        token, name = key.split("::", 1)
        count = counts.get(key, 0)
        lines.append(f'  {ids[key]}["{token.split(":", 1)[-1]}<br/>{name} ({count})"]')
    for key in components:
        parent = owner(key, by_key)
        lines.append(f"  {ids[parent] if parent else 'stack'} --> {ids[key]}")
    added = [ids[k] for k in components if k in review.added]
    changed = [ids[k] for k in components if k in touched and k not in review.added]
    if added:
        lines.append(f"  class {','.join(added)} added")
    if changed:
        lines.append(f"  class {','.join(changed)} changed")
    lines += [
        "  classDef added fill:#dafbe1,stroke:#1a7f37",
        "  classDef changed fill:#fff8c5,stroke:#9a6700",
        "```",
    ]
    return lines


def _mark_ancestors(key: str, table: dict[str, dict[str, Any]], ids: dict[str, str], marked: set[str]) -> None:
    if key in ids:
        marked.add(key)
    parent = table[key]["parent"] if key in table else None
    while parent is not None:
        if parent in ids:
            marked.add(parent)
        parent = table[parent]["parent"] if parent in table else None


def _invalid_lines(review: StackReview) -> list[str]:
    lines = [f"### `{review.stack}`: invalid", ""]
    for side, error in (("at the base", review.base_error), ("in the working tree", review.head_error)):
        if error:
            lines += [f"The stack file {side} is invalid; nothing was synthesized or compared:", "", "```", error, "```", ""]
    return lines


def invalid_sides(review: StackReview) -> str:
    """`base`, `working tree` or both, for the summary table."""
    sides = [name for name, error in (("base", review.base_error), ("working tree", review.head_error)) if error]
    return " and ".join(sides)


def render_stack(review: StackReview) -> list[str]:
    platform = (review.head or review.base or {}).get("config", {}).get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}") or {}
    cluster = (platform.get("cluster") or {}).get("name", "")
    title = f"### `{review.stack}`: {review.status} ({platform.get('cloud', '?')} {platform.get('environment', '?')}, cluster {cluster})"
    if review.status == "invalid":
        return _invalid_lines(review)
    lines = [title, ""]
    if review.status == "removed":
        lines += [
            "The stack file is removed: the deploy workflow stops updating this stack; its resources stay"
            " until someone runs `pulumi destroy` on it.",
            "",
        ]
    replacements = _replacement_lines(review)
    if replacements:
        lines += [*replacements, ""]
    if review.pools:
        lines += [f"**GPU capacity** ({catalog.PRICE_NOTE})", "", *_pool_rows(review), ""]
    if review.settings:
        lines += ["**Stack file**", "", *_changes_table(review.settings, header="setting"), ""]
    lines += [f"**Resources**: {len(review.added)} added, {len(review.removed)} removed, {len(review.changed)} changed", ""]
    lines += [f"- ➕ `{key}`" for key in review.added]
    lines += [f"- ➖ `{key}`" for key in review.removed]
    if review.added or review.removed:
        lines.append("")
    for change in review.changed:
        verb = "**replaced**" if change.replacing else "updated"
        lines += [f"`{change.key}`: {verb}", "", *_changes_table(change.changes, set(change.replacing)), ""]
    if review.outputs:
        lines += ["**Stack outputs**", "", *_changes_table(review.outputs, header="output"), ""]
    if review.head is not None:
        lines += ["**Policy** (working tree)", ""]
        if review.findings:
            lines += [f"- `{f.rule}` on `{f.violation.resource or 'the stack'}`: {f.message}" for f in review.findings]
        elif "workers" in review.head:
            lines.append("The fleet's checks pass: its Kubernetes schema checks, the workers' reach and the fit proof (`gpu-platform check`).")
        else:
            lines.append(f"All {len(RULES)} policy rules and the Kubernetes schema checks pass.")
        lines.append("")
    lines += ["**Components**", "", *mermaid(review), ""]
    return lines


def render(reviews: list[StackReview], base_ref: str, sha: str) -> str:
    lines = [
        "## gpu-platform review",
        "",
        f"Base `{base_ref}` (`{sha[:12]}`) compared with this branch, both synthesized offline"
        " (mocked cloud outputs: IDs, ARNs and endpoints are placeholders).",
        "",
    ]
    changed = [r for r in reviews if r.status != "unchanged"]
    unchanged = [r for r in reviews if r.status == "unchanged"]
    if not changed:
        lines += [f"**No changes**: all {len(reviews)} stack(s) synthesize identically.", ""]
    else:
        lines += [
            "| stack | change | resources | replacements | max GPUs | $/h at max scale | policy |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in changed:
            if r.status == "invalid":
                lines.append(f"| `{r.stack}` | invalid ({invalid_sides(r)}) | - | - | - | - | - |")
                continue
            before = capacity((r.base or {}).get("pools", []))
            after = capacity((r.head or {}).get("pools", []))
            counts = f"+{len(r.added)} −{len(r.removed)} ~{len(r.changed)}"
            lines.append(
                f"| `{r.stack}` | {r.status} | {counts} | {r.replacements} | {_delta_int(before.max_gpus, after.max_gpus)}"
                f" | {_delta_usd(before.usd_max, after.usd_max)} | {_policy_cell(r.findings) if r.head else '-'} |"
            )
        lines.append("")
        for r in changed:
            lines += render_stack(r)
    for r in unchanged:
        blocking = sum(1 for f in r.findings if f.blocking)
        suffix = f" (policy: {blocking} mandatory violation(s), see `gpu-platform check`)" if blocking else ""
        lines.append(f"- `{r.stack}`: no changes{suffix}")
    return "\n".join(lines).rstrip() + "\n"
