"""The site's code: one module per section of Appendix A, plus `appendix_a`,
the pieces they share."""
