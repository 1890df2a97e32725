"""Process pools shared by the rewards and the sandbox (imports nothing of either, so both can import it)."""
