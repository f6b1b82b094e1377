"""The trained policy behind Ray Serve: gateway, batched policy deployments, canary, sessions, stores."""
