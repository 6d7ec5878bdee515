"""`radixgate bench fairness`: a warm flood from one tenant against cold prompts from another, per policy."""
