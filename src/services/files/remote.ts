// The remote half of context.copy(), fetch() and the file streams.
export {};
