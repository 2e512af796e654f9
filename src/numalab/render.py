"""How the book's altair charts reach the page: offline, interactive, light,
in the built book and in JupyterLab.

Every chapter calls :func:`enable` in its second cell. It registers an
altair renderer named ``numalab`` whose output (one MIME bundle per chart)
holds:

``text/html``
    ``<div class="numalab-chart" id="numalab-chart-...">`` followed by a
    small inline ``<script>`` that calls ``vegaEmbed`` on the chart's spec.
    Inside the div sits a static SVG drawing of the chart
    (``.numalab-chart-fallback``), replaced by the interactive view as soon
    as ``vegaEmbed`` runs; where it never runs (a page opened without its
    ``_static``, an untrusted notebook) the SVG is what the reader sees.
``application/vnd.vegalite.v6+json`` (Vega-Lite, altair's major version)
    The spec itself, for front ends that render Vega-Lite natively.
``text/plain``
    A one-line description.

Where ``vegaEmbed`` comes from depends on who runs the kernel:

* **The book** (``numalab build``: papermill, then myst-nb). The vega,
  vega-lite and vega-embed libraries are *not* in the output: the built
  book loads them once per page from ``_static/numalab-vega.js`` (written
  by :mod:`numalab.build` from :func:`javascript_bundle`), so pages stay
  small and nothing is fetched from the network. myst-nb prefers
  ``text/html`` over the Vega-Lite type, and ``_config.yml`` says so.
* **JupyterLab** (and Jupyter Notebook 7), recognised by the
  ``JPY_SESSION_NAME`` variable a Jupyter server puts in the environment
  of the kernels it starts. JupyterLab 4 renders Vega-Lite only up to v5,
  so it too shows the ``text/html``, and it runs the scripts of outputs
  it received from its own kernel (they are trusted; saved notebooks stay
  so through their signature). The first chart after :func:`enable`
  carries the same libraries inline (:func:`libraries_html`, once per
  kernel session, about 900 kB); every later chart is light and embeds
  itself as soon as they are there. Nothing comes from the network.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import os
from functools import lru_cache

import altair as alt

__all__ = ["RENDERER_NAME", "BUNDLE_NAME", "VEGALITE_MIME_TYPE", "EMBED_OPTIONS",
           "READY_EVENT", "enable", "chart_id", "chart_html", "lab_chart_html",
           "libraries_html", "in_jupyter_server", "renderer", "javascript_bundle",
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

#: The window event :func:`libraries_html` fires once ``vegaEmbed`` exists;
#: charts drawn before that (JupyterLab) wait for it.
READY_EVENT = "numalab-vega-ready"

#: Set by a Jupyter server (JupyterLab, Notebook 7) in the environment of
#: the kernels it starts (jupyter_server's SessionManager); papermill and
#: nbclient, which execute the book, do not set it.
JUPYTER_SERVER_ENV = "JPY_SESSION_NAME"

_counter = itertools.count(1)


def in_jupyter_server(environ=None) -> bool:
    """Whether this kernel was started by a Jupyter server (JupyterLab,
    Notebook 7): ``JPY_SESSION_NAME`` is set and not empty. ``environ``
    defaults to ``os.environ``.

    >>> in_jupyter_server({"JPY_SESSION_NAME": "notebooks/01-machine.ipynb"})
    True
    >>> in_jupyter_server({})
    False
    """
    env = os.environ if environ is None else environ
    return bool(env.get(JUPYTER_SERVER_ENV))


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


# The part of a chart's script that embeds it into ``el`` once, then drops
# the fallback drawing; both page kinds share it.
_SHOW_BODY = (
    "if(!el||el.getAttribute('data-embedded')){return;}"
    "el.setAttribute('data-embedded','1');"
    "window.vegaEmbed(el,spec,opt).then(function(){"
    "var f=el.querySelector('.numalab-chart-fallback');if(f){f.remove();}"
    "}).catch(function(e){console.error('numalab chart '+id+': '+e);});}"
)


def _chart(spec: dict, element_id: str, fallback_svg: str, embed_options: dict | None,
           find: str, find_in_show: str, wait: str, between: str) -> str:
    """The div with its fallback drawing, then a script that finds the div
    (``find`` before ``show()``, ``find_in_show`` inside it), embeds it at
    once if ``vegaEmbed`` is there, else on ``wait``."""
    options = dict(EMBED_OPTIONS if embed_options is None else embed_options)
    fallback = (f'<div class="numalab-chart-fallback">{fallback_svg}</div>'
                if fallback_svg else "")
    script = (
        "(function(){"
        f"var id={json.dumps(element_id)},spec={_script_json(spec)},opt={_script_json(options)};"
        + find + "function show(){" + find_in_show + _SHOW_BODY
        + "if(typeof window.vegaEmbed==='function'){show();}" + wait + "})();"
    )
    return (f'<div class="numalab-chart" id="{html.escape(element_id)}">{fallback}</div>'
            f'{between}<script type="text/javascript">{script}</script>\n')


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
    return _chart(spec, element_id, fallback_svg, embed_options,
                  find="", find_in_show="var el=document.getElementById(id);",
                  wait="else{document.addEventListener('DOMContentLoaded',function(){"
                       "if(typeof window.vegaEmbed==='function'){show();}});}",
                  between="\n")


def lab_chart_html(spec: dict, element_id: str, fallback_svg: str = "",
                   embed_options: dict | None = None) -> str:
    """The HTML for one chart in JupyterLab: the same div and fallback
    drawing as :func:`chart_html`, and a script that finds its div as the
    element just before itself (``document.currentScript``: JupyterLab may
    run it while the output is not yet in the document, and a notebook
    shown in two views holds the same id twice), then embeds the chart at
    once if ``vegaEmbed`` is there, or when :data:`READY_EVENT` says it is.

    >>> html = lab_chart_html({"mark": "point"}, "c1")
    >>> html.startswith('<div class="numalab-chart" id="c1">') and READY_EVENT in html
    True
    """
    return _chart(spec, element_id, fallback_svg, embed_options,
                  find="var me=document.currentScript,el=me&&me.previousElementSibling;"
                       "if(!el||el.id!==id){el=document.getElementById(id);}",
                  find_in_show="",
                  wait=f"else{{window.addEventListener({json.dumps(READY_EVENT)},show,{{once:true}});}}",
                  between="")


def libraries_html() -> str:
    """vega, vega-lite and vega-embed (:func:`javascript_bundle`) as one
    inline ``<script>`` for a JupyterLab output, then :data:`READY_EVENT`.

    The bundle travels as a JSON string run by ``new Function`` (vega
    itself compiles expressions the same way), so no character sequence in
    it can end or confuse the ``<script>`` element when JupyterLab parses
    the output; it defines ``window.vegaEmbed`` and friends as in the book.

    >>> html = libraries_html()
    >>> html.startswith('<script') and html.count('</script>') == 1 and READY_EVENT in html
    True
    """
    code = _script_json(javascript_bundle())
    return ('<script type="text/javascript">(function(){'
            "if(typeof window.vegaEmbed!=='function'){"
            f"new Function({code})();}}"
            f"window.dispatchEvent(new Event({json.dumps(READY_EVENT)}));"
            "})();</script>\n")


def renderer(spec: dict, fallback: bool = True, lab: bool = False,
             libraries: bool = False, **metadata) -> dict:
    """The altair renderer: spec -> MIME bundle (see the module docstring).

    ``lab=False`` gives the book's HTML (:func:`chart_html`); ``lab=True``
    JupyterLab's (:func:`lab_chart_html`), preceded by the libraries
    (:func:`libraries_html`) when ``libraries`` is true.
    ``metadata["embed_options"]`` (altair's usual way to pass them) is
    merged over :data:`EMBED_OPTIONS`.
    """
    options = {**EMBED_OPTIONS, **(metadata.get("embed_options") or {})}
    element_id = chart_id(spec, next(_counter))
    svg = _fallback_svg(spec) if fallback else ""
    mark = spec.get("mark")
    kind = mark.get("type") if isinstance(mark, dict) else (mark or "layered/concatenated")
    if lab:
        text_html = ((libraries_html() if libraries else "")
                     + lab_chart_html(spec, element_id, svg, options))
    else:
        text_html = chart_html(spec, element_id, svg, options)
    return {
        "text/html": text_html,
        VEGALITE_MIME_TYPE: spec,
        "text/plain": f"<numalab chart {element_id}: {kind}>",
    }


def enable(fallback: bool = True, lab: bool | None = None) -> None:
    """Register the ``numalab`` altair renderer and make it the active one.

    ``fallback=False`` skips the static SVG drawing (smaller output, no
    picture where vegaEmbed is missing). ``lab`` chooses the output for
    JupyterLab (interactive there, the libraries inline in the first chart
    drawn after this call) or for the book (the libraries come from the
    page); ``None``, the default, means :func:`in_jupyter_server`. Calling
    it again (rerunning the chapter's second cell) sends the libraries
    again with the next chart, for a page that was reloaded. Returns
    nothing, so the cell that calls it shows no output.

    >>> enable(fallback=False)
    >>> alt.renderers.active
    'numalab'
    """
    in_lab = in_jupyter_server() if lab is None else lab
    sent = [False]

    def _render(spec: dict, **metadata) -> dict:
        first = in_lab and not sent[0]
        bundle = renderer(spec, fallback=fallback, lab=in_lab, libraries=first, **metadata)
        sent[0] = sent[0] or first
        return bundle

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
