"""The live panel: ipywidgets controls and Bokeh figures over a TuningSession (thin layer)."""
