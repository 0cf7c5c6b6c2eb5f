print("store-bench: placeholder")
