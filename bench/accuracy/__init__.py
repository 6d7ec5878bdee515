"""`radixgate bench accuracy`: how far each dtype / quantization is from the float32 model."""
