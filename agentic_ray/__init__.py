"""agentic-ray: Ray-native reinforcement learning for tool-using agents."""

__version__ = "0.1.0"
