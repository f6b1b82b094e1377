"""The live debug dashboard (``agentic-ray dashboard RUN_DIR``) and the figures ``report.html`` shares with it.

* :mod:`.run_data`: the run directory, read incrementally while the run writes it;
* :mod:`.figures`: Plotly figures (metrics over env steps, training curves, rewards, failures, trace heatmaps);
* :mod:`.panels`: each page's tables and figures;
* :mod:`.app`: the FastAPI app (pages, JSON endpoints, Plotly's JS from its own package, no CDN).
"""
