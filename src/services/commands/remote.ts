// The remote half of context.exec() and context.$ (see ../commands/).
export {};
