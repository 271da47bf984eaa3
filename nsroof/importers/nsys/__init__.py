"""Nsight Systems exports (`nsys export --type sqlite`, and `.nsys-rep` reports exported through the `nsys`
CLI): the tables nsroof reads (database), PyTorch's emit_nvtx range texts (op_text), the report's export
(rep) and the format's read() (export): the timeline becomes the events a kineto trace gives, so the same
correlation rules, op table, costs and roofs apply."""
