"""How the book's altair charts reach the page: offline, interactive, light.

Every chapter calls :func:`enable` in its second cell. It registers an
altair renderer named ``numalab`` whose output (one MIME bundle per chart)
holds:

``text/html``
    ``<div class="numalab-chart" id="numalab-chart-...">`` followed by a
    small inline ``<script>`` that calls ``vegaEmbed`` on the chart's spec.
    The vega, vega-lite and vega-embed libraries are *not* in the output:
    the built book loads them once per page from ``_static/numalab-vega.js``
    (written by :mod:`numalab.build` from :func:`javascript_bundle`), so
    pages stay small and nothing is fetched from the network. Inside the
    div sits a static SVG drawing of the chart (``.numalab-chart-fallback``),
    replaced by the interactive view as soon as ``vegaEmbed`` runs. Where
    there is no ``vegaEmbed`` (JupyterLab, which picks ``text/html``, or a
    page opened without its ``_static``), the SVG is what the reader sees.
``application/vnd.vegalite.v6+json`` (Vega-Lite, altair's major version)
    The spec itself, for front ends that render Vega-Lite natively.
``text/plain``
    A one-line description.

myst-nb (the book's notebook renderer) prefers ``text/html`` over the
Vega-Lite type, and ``_config.yml`` says so explicitly.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
from functools import lru_cache

import altair as alt

__all__ = ["RENDERER_NAME", "BUNDLE_NAME", "VEGALITE_MIME_TYPE", "EMBED_OPTIONS",
           "enable", "chart_id", "chart_html", "renderer", "javascript_bundle",
           "vegalite_version"]

RENDERER_NAME = "numalab"
#: File name of the vega/vega-lite/vega-embed bundle in the book's ``_static/``.
BUNDLE_NAME = "numalab-vega.js"

#: Options given to vegaEmbed. Tooltips stay on (vega-embed ships its own
#: tooltip handler); the actions menu keeps only "save as SVG/PNG", which
#: works offline, and drops the links that open the online Vega editor.
EMBED_OPTIONS = {
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
    "tooltip": True,
}

_counter = itertools.count(1)


def vegalite_version() -> str:
    """The Vega-Lite version altair writes, as ``MAJOR.MINOR`` (e.g. ``"6.4"``)."""
    return ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])


def _mime_type() -> str:
    """The Vega-Lite MIME type for altair's major version, spelled
    ``application/vnd.vegalite.vN+json``. (altair 6 itself says
    ``...v6.json``, which nbformat refuses to store as JSON.)

    >>> _mime_type().startswith("application/vnd.vegalite.v")
    True
    """
    major = alt.SCHEMA_VERSION.split(".")[0]
    return f"application/vnd.vegalite.{major}+json"


VEGALITE_MIME_TYPE = _mime_type()


def _script_json(obj) -> str:
    """JSON that is safe inside an inline ``<script>``: no ``</script>``,
    no ``<!--`` can end or confuse the element, whatever strings the data hold.

    >>> _script_json({"a": "</script>"})
    '{"a": "\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(obj, sort_keys=True)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e")
                .replace("&", "\\u0026").replace("\u2028", "\\u2028")
                .replace("\u2029", "\\u2029"))


def chart_id(spec: dict, serial: int) -> str:
    """A page-unique, reproducible element id: a digest of the spec plus
    the chart's serial number in this kernel (the same chart shown twice
    gets two ids).

    >>> chart_id({"mark": "point"}, 1)[:14]
    'numalab-chart-'
    """
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    return f"numalab-chart-{digest}-{serial}"


def _fallback_svg(spec: dict) -> str:
    """A static SVG drawing of the chart (vl-convert, offline), or ''."""
    try:
        import vl_convert as vlc
        try:
            return vlc.vegalite_to_svg(spec, vl_version=vegalite_version())
        except ValueError:  # this vl-convert does not know altair's version
            return vlc.vegalite_to_svg(spec)
    except Exception:  # a drawing is a nicety; the interactive chart is the point
        return ""


def chart_html(spec: dict, element_id: str, fallback_svg: str = "",
               embed_options: dict | None = None) -> str:
    """The HTML for one chart: the div, its fallback drawing, and the
    inline script that embeds the interactive view.

    ``vegaEmbed`` comes from ``_static/numalab-vega.js``, loaded in the
    page head; the script also waits for DOMContentLoaded in case a theme
    defers it. Errors go to the console (the browser test fails on them).

    >>> '<div class="numalab-chart" id="c1">' in chart_html({}, "c1")
    True
    """
    options = dict(EMBED_OPTIONS if embed_options is None else embed_options)
    fallback = (f'<div class="numalab-chart-fallback">{fallback_svg}</div>'
                if fallback_svg else "")
    eid = json.dumps(element_id)
    script = (
        "(function(){"
        f"var id={eid},spec={_script_json(spec)},opt={_script_json(options)};"
        "function show(){"
        "var el=document.getElementById(id);"
        "if(!el||el.getAttribute('data-embedded')){return;}"
        "el.setAttribute('data-embedded','1');"
        "window.vegaEmbed(el,spec,opt).then(function(){"
        "var f=el.querySelector('.numalab-chart-fallback');if(f){f.remove();}"
        "}).catch(function(e){console.error('numalab chart '+id+': '+e);});}"
        "if(typeof window.vegaEmbed==='function'){show();}"
        "else{document.addEventListener('DOMContentLoaded',function(){"
        "if(typeof window.vegaEmbed==='function'){show();}});}"
        "})();"
    )
    return (f'<div class="numalab-chart" id="{html.escape(element_id)}">{fallback}</div>\n'
            f'<script type="text/javascript">{script}</script>\n')


def renderer(spec: dict, fallback: bool = True, **metadata) -> dict:
    """The altair renderer: spec -> MIME bundle (see the module docstring).

    ``metadata["embed_options"]`` (altair's usual way to pass them) is
    merged over :data:`EMBED_OPTIONS`.
    """
    options = {**EMBED_OPTIONS, **(metadata.get("embed_options") or {})}
    element_id = chart_id(spec, next(_counter))
    svg = _fallback_svg(spec) if fallback else ""
    mark = spec.get("mark")
    kind = mark.get("type") if isinstance(mark, dict) else (mark or "layered/concatenated")
    return {
        "text/html": chart_html(spec, element_id, svg, options),
        VEGALITE_MIME_TYPE: spec,
        "text/plain": f"<numalab chart {element_id}: {kind}>",
    }


def enable(fallback: bool = True) -> None:
    """Register the ``numalab`` altair renderer and make it the active one.

    ``fallback=False`` skips the static SVG drawing (smaller output, no
    picture where vegaEmbed is missing). Returns nothing, so the cell that
    calls it shows no output.

    >>> enable(fallback=False)
    >>> alt.renderers.active
    'numalab'
    """
    def _render(spec: dict, **metadata) -> dict:
        return renderer(spec, fallback=fallback, **metadata)

    alt.renderers.register(RENDERER_NAME, _render)
    alt.renderers.enable(RENDERER_NAME)


@lru_cache(maxsize=1)
def javascript_bundle() -> str:
    """vega + vega-lite + vega-embed as one classic script (about 900 kB)
    that defines ``window.vegaEmbed``, ``window.vega``, ``window.vegaLite``.

    vl-convert ships the libraries (offline). Its bundle is written as a
    module (top-level ``const`` names); wrapped in a function it runs as a
    classic script, which also works from ``file://`` pages where Chromium
    refuses module scripts, and its names cannot collide with the theme's.
    """
    import vl_convert as vlc
    try:
        body = vlc.javascript_bundle(vl_version=vegalite_version())
    except ValueError:
        body = vlc.javascript_bundle()
    return ("/* vega, vega-lite and vega-embed, bundled by vl-convert-python "
            f"{_vl_convert_version()}; see their licences (BSD-3-Clause). */\n"
            "(function(){\n\"use strict\";\n" + body + "\n})();\n")


def _vl_convert_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("vl-convert-python")
    except PackageNotFoundError:
        return "unknown"
