"""Serving engines that dooly drives and traces. Each adapter builds a model from a config file with random
weights, runs requests through the engine's real batching path, and exposes the per-step hook the tracer uses."""
