"""``sweep.html``: one sweep on one page: the circuit breaker first, then each node's verdict
with a link to its own report, the batches and what was drained. Rendered from the sweep's
summary (``sweep.json``) alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import Environment, select_autoescape

from nvtest.text import visible_value

__all__ = ["render_sweep_html"]

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>nvtest sweep {{ s.sweep_id }}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}.alert{padding:.8em;border-radius:4px;margin:1em 0}
.trip{background:#fde2e1;border:1px solid #c62828}.ok{background:#e8f5e9;border:1px solid #2e7d32}
.fail,.error{color:#b71c1c;font-weight:bold}.pass{color:#1b5e20}.muted{color:#666}</style></head><body>
<h1>nvtest sweep {{ s.sweep_id }}</h1>
<p class="muted">partition {{ s.partition or "(default)" }} · suite {{ s.suite }} · at most {{ s.max_out }} node(s) out of service
({{ s.out_of_service_before }} already out before the sweep, batches of {{ s.batch_size }})</p>
{% if s.note %}<p class="alert trip">{{ s.note }}</p>{% endif %}
{% set b = s.breaker or {} %}
{% if b.tripped %}<div class="alert trip" id="breaker"><b>Circuit breaker tripped:</b> {{ b.reason }}
<div>nodes: {{ b.nodes | join(", ") }}</div></div>
{% else %}<div class="alert ok" id="breaker">Circuit breaker not tripped: {{ b.reason }}</div>{% endif %}
<h2>Nodes</h2><table><tr><th>node</th><th>verdict</th><th>why</th><th>job</th><th>report</th></tr>
{% for n, r in s.nodes | dictsort %}<tr><td>{{ n }}</td><td class="{{ r.verdict }}">{{ r.verdict or "not swept" }}</td>
<td>{{ r.why }}</td><td>{{ r.job or "" }}</td><td>{% if r.report %}<a href="{{ n }}/report.html">report</a>{% endif %}</td></tr>{% endfor %}
</table>
<h2>Batches</h2><ol>{% for bt in s.batches %}<li>{% for n in bt.nodes %}{{ n }} (job {{ bt.jobs.get(n, "-") }}, {{ bt.states.get(n, "-") }}){% if not loop.last %}, {% endif %}{% endfor %}</li>{% endfor %}</ol>
<h2>Drained</h2>{% if s.drained %}<ul>{% for n, a in s.drained | dictsort %}<li>{{ n }}: {{ a.action }}: {{ a.reason }}</li>{% endfor %}</ul>
{% else %}<p>nothing drained</p>{% endif %}
{% for w in s.warnings or [] %}<p class="muted">warning: {{ w }}</p>{% endfor %}
</body></html>
"""

_ENV = Environment(autoescape=select_autoescape(default=True, default_for_string=True), finalize=visible_value)


def render_sweep_html(summary: Mapping[str, Any]) -> str:
    """The page's HTML for a sweep summary (see :func:`nvtest.ops.sweep.run_sweep`)."""
    return _ENV.from_string(_TEMPLATE).render(s=summary)
