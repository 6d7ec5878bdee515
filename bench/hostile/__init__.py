"""`radixgate bench hostile`: template bombs and oversized inputs from one tenant while another is served."""
