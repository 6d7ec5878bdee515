"""The template studio: diffs, the what-if estimate (service.py); routes/template_studio.py serves them."""
