"""Small frozen data files shipped with the package (model weights of model-based reward layers)."""
