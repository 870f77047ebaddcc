"""Deployment configuration (Ray Serve configs, KubeRay manifests, Triton layout); no runtime code."""
